#include "provision/node_registry.hpp"

#include "provision/error.hpp"
#include "provision/file_lock.hpp"
#include "provision/state_file.hpp"
#include "net/cancellation.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <stdexcept>

namespace ferry::provision {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::int64_t format_version = 1;

error_code damaged(const fs::path& file, std::string_view why, diagnostics& diag) {
  diag.set(fmt::format("node registry {} is damaged: {} (move it away to start afresh; its nodes may still run)",
                       file.string(), why));
  return make_error_code(errc::bad_registry);
}

auto find_id(std::vector<node>& nodes, std::string_view id) {
  return std::find_if(nodes.begin(), nodes.end(), [&](const node& n) { return n.id == id; });
}

}  // namespace

fs::path registry_file(const fs::path& state_dir) { return state_dir / "nodes.json"; }

std::string registry_text(const std::vector<node>& nodes) {
  json::array list;
  for (const auto& n : nodes) list.emplace_back(to_json(n));
  json::object doc{{"version", format_version}, {"nodes", std::move(list)}};
  return json::serialize(doc) + "\n";
}

result<std::vector<node>> parse_registry(std::string_view text, const fs::path& file, diagnostics& diag) {
  error_code ec;
  const auto doc = json::parse(text, ec);
  if (ec) return damaged(file, fmt::format("not JSON ({})", ec.message()), diag);
  const auto* top = doc.if_object();
  const auto* version = top ? top->if_contains("version") : nullptr;
  if (!version || !version->is_int64() || version->get_int64() != format_version)
    return damaged(file, "no \"version\": 1", diag);
  const auto* list = top->if_contains("nodes");
  if (!list || !list->is_array()) return damaged(file, "no \"nodes\" array", diag);
  std::vector<node> nodes;
  for (const auto& item : list->get_array()) {
    if (!item.is_object()) return damaged(file, fmt::format("node {} is not an object", nodes.size() + 1), diag);
    try {
      nodes.push_back(node_from_json(item.get_object()));
    } catch (const std::invalid_argument& e) {
      return damaged(file, fmt::format("node {}: {}", nodes.size() + 1, e.what()), diag);
    }
  }
  return nodes;
}

node_registry::node_registry(fs::path file, config::duration lock_timeout)
    : file_(std::move(file)), lock_timeout_(lock_timeout) {}

result<std::vector<node>> node_registry::load(diagnostics& diag) const {
  error_code ec;
  const auto text = read_state_file(file_, ec);
  if (ec == boost::system::errc::is_a_directory) {
    // Found where it stands: a directory made by hand, or by a tool that took the path for a folder.
    diag.set(fmt::format("node registry {} is a directory; ferry keeps its registry of nodes in a file of that "
                         "name. Move the directory away (ferry then starts an empty registry), or set "
                         "XDG_STATE_HOME to give ferry another state directory",
                         file_.string()));
    return ec;
  }
  if (ec) {
    diag.set(fmt::format("cannot read node registry {}: {}", file_.string(), ec.message()));
    return ec;
  }
  if (!text) return std::vector<node>{};
  return parse_registry(*text, file_, diag);
}

struct node_registry::waiter {
  const change* edit;
  diagnostics* diag;
  tracing::action* act;
  std::optional<result<void>> outcome;  // set once its batch was written (or failed)
};

void node_registry::wake_all() {
  if (turn_) turn_->notify();
}

asio::awaitable<result<void>> node_registry::modify(tracing::action& parent, std::string_view action_type,
                                                    const change& edit, diagnostics& diag) {
  auto act = parent.child(action_type, {{"file", file_.string()}});
  // The timer lives only while someone is here: the registry outlives the io_context of one command.
  if (callers_++ == 0) {
    turn_.emplace(co_await asio::this_coro::executor);
  }
  waiter self{&edit, &diag, &act, std::nullopt};
  queue_.push_back(&self);
  while (!self.outcome) {
    if (!committing_) {
      co_await commit_next(self);
      continue;
    }
    error_code ec;  // woken or cancelled: the loop looks again
    co_await turn_->wait(ec);
    if (!self.outcome && co_await net::cancelled()) {
      std::erase(queue_, &self);
      diag.set(fmt::format("updating node registry {}: cancelled", file_.string()));
      self.outcome = error_code(asio::error::operation_aborted);
      act.fail(asio::error::operation_aborted, diag);
    }
  }
  if (--callers_ == 0) turn_.reset();
  co_return *self.outcome;
}

asio::awaitable<void> node_registry::commit_next(waiter& self) {
  committing_ = true;
  const auto now = std::chrono::steady_clock::now();
  // The pause lets every change that is ready now join the batch; after a slow write it is longer.
  if (next_write_ > now) {
    asio::steady_timer pause(co_await asio::this_coro::executor, next_write_ - now);
    error_code ignored;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  } else {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  diagnostics lock_diag;
  std::optional<result<file_lock>> lock;
  bool gave_up = co_await net::cancelled();
  if (!gave_up) {
    lock.emplace(co_await lock_file(fs::path(file_).concat(".lock"), lock_timeout_, lock_diag));
    if (!*lock) gave_up = co_await net::cancelled();
  }
  if (gave_up) {
    // Only this caller gave up: the others go on, one of them leading the next batch.
    std::erase(queue_, &self);
    self.diag->set(fmt::format("updating node registry {}: cancelled", file_.string()));
    self.outcome = error_code(asio::error::operation_aborted);
    self.act->fail(asio::error::operation_aborted, *self.diag);
  } else {
    auto batch = std::exchange(queue_, {});
    if (!*lock) {
      for (auto* w : batch) {
        *w->diag = lock_diag;
        w->outcome = lock->error();
        w->act->fail(lock->error(), lock_diag);
      }
    } else {
      const auto started = std::chrono::steady_clock::now();
      apply(batch);
      const auto took = std::chrono::steady_clock::now() - started;
      next_write_ = std::chrono::steady_clock::now() + took;
    }
  }
  committing_ = false;
  wake_all();
}

// Each change is made on the list as the ones before it left it; one that fails leaves it as it was.
void node_registry::apply(std::vector<waiter*>& batch) {
  diagnostics load_diag;
  auto nodes = load(load_diag);
  if (!nodes) {
    for (auto* w : batch) {
      *w->diag = load_diag;
      w->outcome = nodes.error();
      w->act->fail(nodes.error(), load_diag);
    }
    return;
  }
  std::vector<waiter*> made;
  for (auto* w : batch) {
    auto before = *nodes;
    if (const auto ec = (*w->edit)(*nodes, *w->diag)) {
      *nodes = std::move(before);
      w->outcome = ec;
      w->act->fail(ec, *w->diag);
    } else {
      made.push_back(w);
    }
  }
  if (made.empty()) return;
  diagnostics write_diag;
  const auto written = write_state_file(file_, registry_text(*nodes), write_diag);
  for (auto* w : made) {
    if (!written) *w->diag = write_diag;
    w->outcome = written;
    w->act->finish(written, *w->diag, {{"nodes", nodes->size()}, {"batch", made.size()}});
  }
}

asio::awaitable<result<void>> node_registry::ensure_usable(tracing::action& parent, std::string& notice,
                                                           diagnostics& diag) {
  auto act = parent.child(action_types::registry::check, {{"file", file_.string()}});
  auto lock = co_await lock_file(fs::path(file_).concat(".lock"), lock_timeout_, diag);
  if (!lock) {
    act.fail(lock.error(), diag);
    co_return lock.error();
  }
  diagnostics why;
  auto nodes = load(why);
  if (nodes) {
    act.succeed({{"nodes", nodes->size()}});
    co_return result<void>{};
  }
  if (nodes.error() != errc::bad_registry) {
    diag = std::move(why);
    act.fail(nodes.error(), diag);
    co_return nodes.error();
  }
  const auto aside = fs::path(file_).concat(fmt::format(".damaged-{}", std::time(nullptr)));
  std::error_code ec;
  fs::rename(file_, aside, ec);
  if (ec) {
    diag.set(fmt::format("{}; moving it to {} failed: {}", why.message, aside.string(), ec.message()));
    act.fail(errc::bad_registry, diag);
    co_return make_error_code(errc::bad_registry);
  }
  notice = fmt::format("{}; moved it to {} and started a new one. Nodes it listed may still run: end them "
                       "through their provider",
                       why.message.substr(0, why.message.find(" (move it away")), aside.string());
  act.succeed({{"moved_to", aside.string()}});
  co_return result<void>{};
}

asio::awaitable<result<void>> node_registry::add(tracing::action& parent, const node& n, diagnostics& diag) {
  const change edit = [&n](std::vector<node>& nodes, diagnostics&) {
    if (auto it = find_id(nodes, n.id); it != nodes.end())
      *it = n;
    else
      nodes.push_back(n);
    return error_code{};
  };
  co_return co_await modify(parent, action_types::registry::add, edit, diag);
}

asio::awaitable<result<void>> node_registry::update(tracing::action& parent, const node& n, diagnostics& diag) {
  const change edit = [&n, this](std::vector<node>& nodes, diagnostics& d) {
    auto it = find_id(nodes, n.id);
    if (it == nodes.end()) {
      d.set(fmt::format("node {} is not in the node registry {}", n.id, file_.string()));
      return make_error_code(errc::node_not_found);
    }
    *it = n;
    return error_code{};
  };
  co_return co_await modify(parent, action_types::registry::update, edit, diag);
}

asio::awaitable<result<void>> node_registry::remove(tracing::action& parent, std::string_view id,
                                                    diagnostics& diag) {
  const change edit = [id](std::vector<node>& nodes, diagnostics&) {
    std::erase_if(nodes, [id](const node& n) { return n.id == id; });
    return error_code{};
  };
  co_return co_await modify(parent, action_types::registry::remove, edit, diag);
}

}  // namespace ferry::provision
