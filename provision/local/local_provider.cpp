#include "provision/local/local_provider.hpp"

#include "provision/error.hpp"
#include "provision/file_lock.hpp"
#include "provision/local/network.hpp"
#include "provision/local/self_stop.hpp"
#include "provision/state_file.hpp"
#include "tracing/action_types.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <stdexcept>

namespace ferry::provision::local {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view id_prefix = "local-";

std::string random_id() {
  std::random_device rd;
  return fmt::format("{}{:06x}", id_prefix, rd() & 0xffffff);
}

// Ids name directories: anything but "local-" and hex digits is no node of ours (and no path to follow).
bool is_local_id(std::string_view id) {
  return id.starts_with(id_prefix) && id.size() > id_prefix.size() &&
         id.substr(id_prefix.size()).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

fs::path record_file(const fs::path& dir) { return dir / "node.json"; }

result<node> read_record(const fs::path& dir, diagnostics& diag) {
  error_code ec;
  const auto file = record_file(dir);
  const auto text = read_state_file(file, ec);
  if (ec || !text) {
    diag.set(ec ? fmt::format("cannot read {}: {}", file.string(), ec.message())
                : fmt::format("no local node record {}", file.string()));
    return ec ? ec : make_error_code(errc::node_not_found);
  }
  const auto doc = json::parse(*text, ec);
  try {
    if (!ec && doc.is_object()) return node_from_json(doc.get_object());
  } catch (const std::invalid_argument&) {
  }
  diag.set(fmt::format("local node record {} is damaged", file.string()));
  return make_error_code(errc::bad_registry);
}

result<void> write_record(const fs::path& dir, const node& n, diagnostics& diag) {
  return write_state_file(record_file(dir), json::serialize(to_json(n)) + "\n", diag);
}

// Every node record in the state dir; damaged ones are skipped (and reported through `skipped`).
std::vector<node> read_all(const fs::path& state_dir, std::vector<std::string>& skipped) {
  std::vector<node> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(state_dir, ec)) {
    if (!entry.is_directory(ec) || !is_local_id(entry.path().filename().string())) continue;
    diagnostics d;
    if (auto n = read_record(entry.path(), d))
      out.push_back(std::move(*n));
    else
      skipped.push_back(d.message);
  }
  std::sort(out.begin(), out.end(), [](const node& a, const node& b) {
    return std::tie(a.created_at, a.name, a.id) < std::tie(b.created_at, b.name, b.id);
  });
  return out;
}

// The smallest "node-N" no node uses: names stay short when nodes come and go.
std::string next_name(const std::vector<node>& nodes) {
  std::set<std::string> taken;
  for (const auto& n : nodes) taken.insert(n.name);
  for (int i = 1;; ++i)
    if (auto name = fmt::format("node-{}", i); !taken.contains(name)) return name;
}

}  // namespace

node with_current_state(node n) {
  n.details.erase("state_reason");
  if (!n.details.contains("pid")) {
    // Reserved by a create that has not recorded its machine yet (or died before it could).
    n.state = node_state::pending;
    n.details["state_reason"] = "being set up";
    return n;
  }
  const auto m = machine::from_json(n.details);
  switch (status_of(m)) {
    case machine_status::running: n.state = node_state::running; break;
    case machine_status::booting: n.state = node_state::pending; break;
    case machine_status::gone: {
      // Its watchdog ended it when idle: stopped, until `ferry nodes down` removes what is left.
      error_code ec;
      if (const auto why = read_state_file(self_stopped_marker(m.dir), ec)) {
        n.state = node_state::stopped;
        auto reason = *why;
        while (!reason.empty() && reason.back() == '\n') reason.pop_back();
        n.details["state_reason"] = reason.empty() ? "stopped itself" : reason;
        break;
      }
      n.state = node_state::terminated;
      const auto line = last_log_line(m);
      n.details["state_reason"] = line.empty() ? "sshd is not running" : "sshd is not running; its log ends: " + line;
      break;
    }
  }
  return n;
}

local_provider::local_provider(local_options options) : options_(std::move(options)) {}

// A fresh id, a name, the node's dir and its first record, under the lock so concurrent commands never
// hand out the same name.
asio::awaitable<result<node>> local_provider::reserve(tracing::action& parent, diagnostics& diag) {
  const auto lock_path = options_.state_dir / ".lock";
  auto lock = co_await lock_file(lock_path, options_.lock_timeout, diag);
  if (!lock) co_return lock.error();
  std::vector<std::string> skipped;
  const auto existing = read_all(options_.state_dir, skipped);
  node n;
  n.provider = "local";
  n.name = next_name(existing);
  n.state = node_state::pending;
  n.created_at = n.last_used_at = unix_now();
  std::error_code ec;
  do {
    n.id = random_id();
  } while (fs::exists(node_dir(n.id), ec));
  fs::create_directories(node_dir(n.id), ec);
  if (ec) {
    diag.set(fmt::format("cannot create {}: {}", node_dir(n.id).string(), ec.message()));
    co_return make_error_code(errc::local_setup_failed);
  }
  parent.log(action_types::local::reserved, {{"node", n.id}, {"name", n.name}});
  if (auto written = write_record(node_dir(n.id), n, diag); !written) co_return written.error();
  co_return n;
}

asio::awaitable<result<node>> local_provider::create_one(tracing::action& parent, diagnostics& diag) {
  auto reserved = co_await reserve(parent, diag);
  if (!reserved) co_return reserved;
  node n = std::move(*reserved);
  const machine_spec spec{n.id,           node_dir(n.id),      options_.network,        {},
                          options_.public_key_line, options_.boot_delay, options_.sshd, options_.command_timeout};
  auto started = co_await start_machine(parent, spec, diag);
  std::error_code ec;
  if (!started) {
    fs::remove_all(node_dir(n.id), ec);
    co_return started.error();
  }
  n.host = started->address;
  n.port = started->port;
  n.user = started->user;
  n.details = started->to_json();
  n.details["boot_delay_ms"] = options_.boot_delay.count();
  n = with_current_state(std::move(n));
  if (auto written = write_record(node_dir(n.id), n, diag); !written) {
    diagnostics ignored;
    co_await stop_machine(parent, *started, options_.command_timeout, ignored);
    fs::remove_all(node_dir(n.id), ec);
    co_return written.error();
  }
  co_return n;
}

asio::awaitable<result<std::vector<node>>> local_provider::create(tracing::action& parent, const node_spec& spec,
                                                                  diagnostics& diag) {
  auto act = parent.child(action_types::local::create,
                          {{"count", spec.count}, {"boot_delay_ms", options_.boot_delay.count()}});
  std::vector<node> made;
  for (int i = 0; i < spec.count; ++i) {
    auto one = co_await create_one(act, diag);
    if (one) {
      made.push_back(std::move(*one));
      continue;
    }
    // All or nothing: a half-made set of nodes would leave the caller to find and end the rest.
    for (const auto& n : made) {
      diagnostics ignored;
      co_await terminate(act, n, ignored);
    }
    act.fail(one.error(), diag);
    co_return one.error();
  }
  act.succeed();
  co_return made;
}

asio::awaitable<result<node>> local_provider::describe(tracing::action& parent, const node& n, diagnostics& diag) {
  auto act = parent.child(action_types::local::describe, {{"node", n.id}});
  auto record = is_local_id(n.id) ? read_record(node_dir(n.id), diag) : result<node>(errc::node_not_found);
  if (!record && record.error() == errc::node_not_found) {
    // Its dir is gone: terminated, as a cloud describes an instance it has ended.
    node gone = n;
    gone.state = node_state::terminated;
    gone.details["state_reason"] = "no record in " + options_.state_dir.string();
    act.succeed({{"state", "terminated"}});
    co_return gone;
  }
  if (!record) {
    act.fail(record.error(), diag);
    co_return record.error();
  }
  auto now = with_current_state(std::move(*record));
  act.succeed({{"state", to_string(now.state)}});
  co_return now;
}

asio::awaitable<result<void>> local_provider::terminate(tracing::action& parent, const node& n, diagnostics& diag) {
  auto act = parent.child(action_types::local::terminate, {{"node", n.id}});
  if (!is_local_id(n.id)) {
    diag.set(fmt::format("'{}' is not a local node id", n.id));
    act.fail(make_error_code(errc::node_not_found), diag);
    co_return make_error_code(errc::node_not_found);
  }
  diagnostics unread;
  const auto record = read_record(node_dir(n.id), unread);
  // Without a readable record, what the caller knows of the node still says what to end.
  auto m = machine::from_json(record ? record->details : n.details);
  // A create that died between reserving the node and recording its machine left no names: its namespace,
  // if any, is still called after the id (and takes its veth with it).
  if (m.netns.empty() && options_.network == network_mode::netns) m.netns = netns_name(n.id);
  auto stopped = co_await stop_machine(act, m, options_.command_timeout, diag);
  if (stopped) {
    std::error_code ec;
    fs::remove_all(node_dir(n.id), ec);
  }
  act.finish(stopped, diag);
  co_return stopped;
}

std::string local_provider::self_stop_command(const node& n) const {
  return local::self_stop_command(machine::from_json(n.details));
}

asio::awaitable<result<std::vector<node>>> local_provider::list(tracing::action& parent, diagnostics&) {
  auto act = parent.child(action_types::local::list, {{"dir", options_.state_dir.string()}});
  std::vector<std::string> skipped;
  auto nodes = read_all(options_.state_dir, skipped);
  for (const auto& why : skipped) act.log(action_types::local::unreadable_record, {{"reason", why}});
  for (auto& n : nodes) n = with_current_state(std::move(n));
  act.succeed({{"nodes", nodes.size()}});
  co_return nodes;
}

}  // namespace ferry::provision::local
