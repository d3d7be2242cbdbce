#include "agent/node/materialise_layers.hpp"

#include "agent/node/content_dir.hpp"
#include "agent/node/site_file.hpp"

#include "agent/node/error.hpp"
#include "agent/node/import_server.hpp"
#include "agent/node/layer_places.hpp"
#include "agent/node/tenant_account.hpp"
#include "agent/node/peer_server.hpp"
#include "agent/node/python_files.hpp"
#include "tracing/sink.hpp"
#include "agent/node/plan_progress.hpp"
#include "agent/node/shard_tee.hpp"
#include "net/cancellation.hpp"
#include "net/notifier.hpp"
#include "net/retry.hpp"
#include "net/run_all.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/value_from.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

namespace ferry::agent::node {
namespace {

using slots_channel = asio::experimental::channel<void(error_code)>;

// A slot of the plan's download parallelism, given back on every way out.
class slot {
 public:
  static asio::awaitable<result<slot>> take(slots_channel& slots) {
    error_code ec;
    co_await slots.async_send(error_code{}, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return net::as_cancellation(ec);
    co_return slot(slots);
  }
  slot(slot&& other) noexcept : slots_(std::exchange(other.slots_, nullptr)) {}
  slot& operator=(slot&&) = delete;
  ~slot() {
    if (slots_) slots_->try_receive([](error_code) {});
  }

 private:
  explicit slot(slots_channel& slots) : slots_(&slots) {}
  slots_channel* slots_;
};

struct shared_state {
  // A constructor, not braces: GCC 12 destroys a temporary twice when a coroutine aggregate-initialises
  // from it.
  shared_state(fetch_context& c, layer_places& lc, asio::any_io_executor io)
      : ctx(c), cache(lc), slots(io, static_cast<std::size_t>(std::max(1, c.limits.parallelism))), shards_came(io) {}

  fetch_context& ctx;
  layer_places& cache;
  slots_channel slots;  // shards downloading at once
  net::notifier shards_came;  // a shard line came, or the plan stops: a shard waiting for its line looks again
  bool stop = false;  // a layer failed for good: start nothing new
  std::string peer;   // a peer line's server (fan-out): first attempts fetch there
  std::string token;  // the header's peer_token
};

// A peer line: later first attempts go to that server.
bool took_peer(shared_state& s, tracing::action& act, plan_line& line) {
  auto* p = std::get_if<plan_peer>(&line);
  if (!p) return false;
  s.peer = std::move(p->url);
  act.log(action_types::node::peer, {{"url", s.peer}});
  return true;
}

// Waits for the layer's lock, polling with a growing pause, up to the plan's lock timeout.
asio::awaitable<result<packaging::unique_fd>> lock_layer(tracing::action& parent, shared_state& s,
                                                         const layer_source& layer, diagnostics& diag) {
  auto lock = s.cache.try_lock(layer.id, diag);
  if (!lock || lock->get() >= 0) co_return lock;
  auto act = parent.child(action_types::node::lock, {{"layer", layer.id}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.ctx.limits.lock_timeout_ms);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    if (std::chrono::steady_clock::now() >= deadline) {
      diag.set(fmt::format("layer {} stayed locked by another run for {} ms ({})", layer.name,
                           s.ctx.limits.lock_timeout_ms, s.cache.layer_dir(layer.id) + ".lock"));
      const auto ec = make_error_code(errc::lock_timeout);
      act.fail(ec, diag);
      co_return ec;
    }
    timer.expires_after(pause);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      act.fail(ec, diag);
      co_return ec;
    }
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
    lock = s.cache.try_lock(layer.id, diag);
    if (!lock) {
      act.fail(lock.error(), diag);
      co_return lock;
    }
    if (lock->get() >= 0) {
      act.succeed();
      co_return lock;
    }
  }
}

result<void> check_space(const layer_places& cache, const layer_source& layer, diagnostics& diag) {
  struct statvfs fs {};
  auto dir = cache.layer_dir(layer.id);
  dir.resize(dir.rfind('/'));
  if (::statvfs(dir.c_str(), &fs) != 0) return {};
  const auto free = std::uint64_t(fs.f_bavail) * fs.f_frsize;
  const auto needed = content_bytes(layer);
  if (needed <= free) return {};
  diag.set(fmt::format("no space left in {}: layer {} needs {} bytes, {} are free", dir, layer.name, needed, free));
  return make_error_code(errc::disk_full);
}

// One shard of a layer's attempt, once a download slot is free; its error, if any, in `out`.
asio::awaitable<void> fetch_one(tracing::action& act, shared_state& s, const layer_source& layer, std::size_t i,
                                const std::string& peer, layer_writer& writer, diagnostics& d, error_code& out,
                                std::uint64_t& total_downloaded) {
  co_await net::accept_cancellation();
  // A shard still on its way to storage waits for its line (plan_shard) before it takes a slot: the slots
  // go to shards that can be fetched now.
  while (!layer.shards[i].stored()) {
    if (s.stop) {
      out = asio::error::operation_aborted;
      co_return;
    }
    error_code ec;
    co_await s.shards_came.wait(ec);
    if (co_await net::cancelled()) {
      out = asio::error::operation_aborted;
      co_return;
    }
  }
  auto taken = co_await slot::take(s.slots);
  if (!taken) {
    out = taken.error();
    co_return;
  }
  if (s.stop) {
    out = asio::error::operation_aborted;
    co_return;
  }
  auto shard = layer.shards[i];
  if (!peer.empty()) shard.url = fmt::format("{}/shards/{}", peer, shard.sha256);
  // The source is in the trace: "storage", or the peer's address (never a presigned URL).
  auto shard_act = act.child(action_types::node::shard, {{"layer", layer.id},
                                                        {"shard", i + 1},
                                                        {"bytes", shard.bytes},
                                                        {"source", peer.empty() ? std::string("storage") : peer}});
  const auto label = fmt::format("layer {} ({}, shard {} of {}{})", layer.name, layer.id.substr(0, 12), i + 1,
                                 layer.shards.size(), peer.empty() ? "" : " from peer " + peer);
  auto got = co_await fetch_shard(shard_act, s.ctx, shard, label, writer, d,
                                 peer.empty() ? std::string_view() : s.token);
  if (!got) {
    out = got.error();
    shard_act.fail(out, d);
    co_return;
  }
  total_downloaded += got->downloaded;
  shard_act.succeed({{"downloaded", got->downloaded}, {"entries", got->entries}});
}

// A layer's temporary directory, removed on every way out (an exception too) unless it became the layer.
class temp_dir_guard {
 public:
  temp_dir_guard(const layer_places& cache, std::string path) : cache_(cache), path_(std::move(path)) {}
  temp_dir_guard(const temp_dir_guard&) = delete;
  temp_dir_guard& operator=(const temp_dir_guard&) = delete;
  ~temp_dir_guard() {
    if (!kept_) cache_.remove(path_);
  }
  void keep() { kept_ = true; }

 private:
  const layer_places& cache_;
  std::string path_;
  bool kept_ = false;
};

// What a layer's attempts share: one temporary directory, and the shards already in it. A shard that
// passed its checks stays there; a later attempt fetches only the others.
struct layer_progress {
  explicit layer_progress(std::size_t shards) : done(shards, false) {}

  std::optional<std::string> temp;
  std::optional<temp_dir_guard> guard;  // removes it on every way out, unless it became the layer
  std::vector<bool> done;
  std::uint64_t written = 0;     // by the shards done
  std::uint64_t downloaded = 0;  // over every attempt
  std::map<std::string, mode_t> cut_files;  // the files pieces were written into, with their final modes
};

// One try at a layer: every shard not yet done into the layer's temporary directory, which becomes the
// layer once all are done. A shard that fails takes back what it wrote.
// `peer` by value: the caller's is a temporary, and this coroutine starts after it is gone.
asio::awaitable<result<std::uint64_t>> attempt_layer(tracing::action& act, shared_state& s, const layer_source& layer,
                                                     std::string peer, layer_progress& progress, diagnostics& diag) {
  if (!progress.temp) {
    auto temp = s.cache.make_temp(layer.id, diag);
    if (!temp) co_return temp.error();
    progress.temp = std::move(*temp);
    progress.guard.emplace(s.cache, *progress.temp);
  }
  const auto& temp = *progress.temp;
  packaging::unique_fd root(::open(temp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root.get() < 0) {
    diag.set(fmt::format("cannot open {}: {}", temp, std::strerror(errno)));
    co_return make_error_code(errc::cache_failed);
  }
  const auto total = content_bytes(layer);
  std::vector<std::unique_ptr<layer_writer>> writers(layer.shards.size());
  std::vector<diagnostics> diags(layer.shards.size());
  std::vector<error_code> errors(layer.shards.size());
  std::vector<asio::awaitable<void>> work;
  for (std::size_t i = 0; i < layer.shards.size(); ++i) {
    if (progress.done[i]) continue;
    writers[i] = std::make_unique<layer_writer>(root.get(), temp, layer.name, total);
    if (layer.shards[i].is_piece()) writers[i]->write_as_piece(layer.shards[i].piece_offset);
    work.push_back(fetch_one(act, s, layer, i, peer, *writers[i], diags[i], errors[i], progress.downloaded));
  }
  co_await net::run_all(std::move(work));
  for (std::size_t i = 0; i < writers.size(); ++i) {
    if (!writers[i]) continue;
    if (errors[i]) {
      writers[i]->undo();
      continue;
    }
    progress.done[i] = true;
    progress.written += writers[i]->bytes_written();
    if (auto cut = writers[i]->piece_file()) progress.cut_files.insert(*cut);
  }
  // The writers' and the root's descriptors close before anything is removed or renamed.
  writers.clear();
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i]) continue;
    diag = std::move(diags[i]);
    co_return errors[i];
  }
  // Every piece is in: each cut file takes its own mode, which may be read-only.
  for (const auto& [name, mode] : progress.cut_files)
    if (auto r = layer_writer::set_mode(root.get(), name, mode, layer.name, diag); !r) co_return r.error();
  root = packaging::unique_fd();
  if (auto r = s.cache.commit(layer.id, temp, progress.written, diag); !r) co_return r.error();
  progress.guard->keep();
  co_return progress.downloaded;
}

bool worth_retrying(const error_code& ec) {
  // A cut download shows as a short body; a damaged transfer as a bad digest or zip. Each may pass on
  // another try; what the plan or the disk decided will not.
  return net::is_retryable(ec) || ec == make_error_code(errc::download_failed) ||
         ec == make_error_code(errc::digest_mismatch) || ec == make_error_code(errc::bad_zip);
}

asio::awaitable<result<layer_result>> materialise_layer(tracing::action& parent, shared_state& s,
                                                        const layer_source& layer, diagnostics& diag) {
  auto act = parent.child(action_types::node::layer, {{"layer", layer.id}, {"name", layer.name}});
  auto finish = [&](const error_code& ec) {
    act.fail(ec, diag);
    return result<layer_result>(boost::system::in_place_error, ec);
  };
  auto cached = [&]() {
    s.cache.touch(layer.id);
    for (const auto& shard : layer.shards)
      if (shard.stored()) no_copy_of(s.ctx.serve_dir, shard.sha256);  // the rest when their lines come
    act.succeed({{"cached", true}});
    return layer_result{true, 0};
  };
  if (s.cache.cached(layer.id)) co_return cached();
  auto lock = co_await lock_layer(act, s, layer, diag);
  if (!lock) co_return finish(lock.error());
  if (s.cache.cached(layer.id)) co_return cached();  // another run made it while we waited
  if (auto r = check_space(s.cache, layer, diag); !r) co_return finish(r.error());
  // With a peer, the first attempt goes there, and every failure of it (a peer that is gone, slow, or
  // sends bytes that do not match) is followed by the usual attempts from storage.
  const std::string peer = s.token.empty() ? std::string() : s.peer;
  const int attempts = s.ctx.limits.attempts + (peer.empty() ? 0 : 1);
  const config::retry_settings policy{attempts, std::chrono::milliseconds(s.ctx.limits.retry_base_ms),
                                      std::chrono::milliseconds(s.ctx.limits.retry_max_ms)};
  bool from_peer = false;
  layer_progress progress(layer.shards.size());
  auto got = co_await net::with_retry<std::uint64_t>(
      act, action_types::node::attempt, policy,
      [&](tracing::action& try_act, net::attempt_info& info) {
        from_peer = info.number == 1 && !peer.empty();
        return attempt_layer(try_act, s, layer, from_peer ? peer : std::string(), progress, info.diag);
      },
      [&](const error_code& ec) {
        return !s.stop && ec != asio::error::operation_aborted && (from_peer || worth_retrying(ec));
      },
      diag);
  if (!got) co_return finish(got.error());
  const auto downloaded = *got;
  act.succeed({{"cached", false}, {"downloaded", downloaded}});
  co_return layer_result{false, downloaded};
}

// The plan as it arrives, and the workers' wake-ups: one token per layer queued, then one `no_more` per
// worker at the plan's end; closed when the plan stops.
struct arrivals {
  arrivals(asio::any_io_executor io, int worker_count) : workers(worker_count), queue(io, 1 << 16), changed(io) {}

  static constexpr std::size_t no_more = SIZE_MAX;

  plan_progress plan;
  int workers;
  asio::experimental::channel<void(error_code, std::size_t)> queue;
  net::notifier changed;  // wakes the workers a held layer keeps waiting

  // A layer finished, or one was asked for: a held layer may go now.
  void wake() {
    changed.notify();
  }
  // The plan stops: nothing new starts, and the workers waiting for a token end.
  void stop(shared_state& s) {
    s.stop = true;
    queue.close();
    wake();
    s.shards_came.notify();  // no shard line will come for a shard that waits for one
  }
};

// The next layer for a worker that holds a token, waiting while the queue's head is held (plan_progress::
// held); none when the plan stops or the worker is cancelled.
asio::awaitable<const layer_source*> next_layer(arrivals& in) {
  for (;;) {
    if (const auto* layer = in.plan.next()) co_return layer;
    if (!in.plan.held()) co_return nullptr;
    error_code ec;
    co_await in.changed.wait(ec);
    if (co_await net::cancelled()) co_return nullptr;
  }
}

// The plan's site as the command's import hook reads it (site_file.hpp); the file's path.
result<std::string> write_site(const layer_places& cache, const plan_site& site, diagnostics& diag) {
  const auto layer_dir = [&](const std::string& id) { return cache.layer_dir(id); };
  const auto text = site_file_text(site, layer_dir);
  const auto paths = path_map_text(site, layer_dir);
  const content_file files[] = {{"site.json", text}, {"paths.json", paths}};
  auto dir = install_content(cache.dir() + "/site", files, diag);
  if (!dir) return dir.error();
  return *dir + "/site.json";
}

// A lazy start (import_gate.hpp): the command starts once the catalogue and the workspace are here, its
// import hook is served while the rest arrives, and a work_done line (or the input's end after the plan's)
// ends it all, whatever is still on its way.
struct lazy_start {
  lazy_start(tracing::action& a, layer_places& c) : act(a), cache(c) {}

  tracing::action& act;
  layer_places& cache;
  import_gate gate;
  std::unique_ptr<import_server> server;
  std::string hook_dir;
  std::string site_file;  // once the plan's site came: where the hook reads it
  std::string workdir;
  asio::cancellation_signal stop_work;  // the layers in progress, when the command is over
  bool announced = false;
  bool all_told = false;
  bool done = false;
  std::size_t left = 0;  // pending when the command ended
  std::chrono::steady_clock::time_point begin = std::chrono::steady_clock::now();

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  }

  // Says the command may start once the catalogue is here and the workspace in place; says when the last
  // layer landed.
  void look() {
    if (!gate.opened()) return;
    if (server) server->changed();
    const auto ws = gate.workspace();
    if (!announced && (!ws || gate.state_of(*ws) == import_gate::state::ready)) {
      announced = true;
      // Every layer's directory, in plan order, whether it is there yet or not: sys.path is then the one
      // an eager start gives, and a layer appears in it whole, by a rename, when it lands.
      boost::json::array path;
      for (std::size_t i = 0; i < gate.count(); ++i) path.emplace_back(gate.dir(i));
      act.log(action_types::node::may_start, {{"workdir", ws ? gate.dir(*ws) : workdir},
                                              {"hook_dir", hook_dir},
                                              {"site_file", site_file},
                                              {"python_path", boost::json::value(std::move(path))},
                                              {"socket", server->socket_path()},
                                              {"seconds", seconds()}});
      act.output().nudge();  // ferry is waiting for this line to start the command
    }
    if (!all_told && gate.all_landed()) {
      all_told = true;
      act.log(action_types::node::all_landed, {{"layers", gate.count()}, {"pending", 0}, {"seconds", seconds()}});
    }
  }

  void ended(const layer_source& layer, const result<layer_result>& got, const diagnostics& diag) {
    if (got) gate.landed(layer.id);
    else if (got.error() != asio::error::operation_aborted) gate.failed(layer.id, describe(got.error(), diag));
    look();
  }

  // The plan stops short (a layer failed, the input broke): what has not landed never will.
  void stopped(const std::string& reason) {
    gate.stop(reason);
    look();
  }

  // No command will start: the workspace failed, or the plan stopped before it landed. The program then
  // ends with that failure rather than wait for a work_done that ferry, waiting for may_start, never sends.
  bool never_starts() const {
    if (announced) return false;
    const auto ws = gate.workspace();
    return gate.opened() && ws && gate.state_of(*ws) == import_gate::state::failed;
  }

  // The command is over: in-flight layers stop, the hook's socket closes.
  void finish(arrivals& in, shared_state& s) {
    if (done) return;
    done = true;
    left = gate.pending();
    act.log(action_types::node::imported, {{"layers", boost::json::value_from(gate.imported_layers())}});
    if (left > 0) act.log(action_types::node::all_landed, {{"layers", gate.count()}, {"pending", left},
                                                           {"seconds", seconds()}});
    in.stop(s);
    stop_work.emit(asio::cancellation_type::total);
    gate.stop("the command ended");
    if (server) server->close();
  }
};

// A layer was queued: one worker's token; the plan ended: every worker's `no_more`. False once the queue
// is closed.
asio::awaitable<bool> wake_workers(arrivals& in, bool ended) {
  for (int w = 0; w < (ended ? in.workers : 1); ++w) {
    error_code ec;
    co_await in.queue.async_send(error_code{}, ended ? arrivals::no_more : 0,
                                 asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;
  }
  co_return true;
}

// Takes a plan line; a layer queued for the first time is said in the trace, with when it came.
result<plan_progress::taken> take_line(tracing::action& act, layer_places& places, plan_progress& plan,
                                       plan_line line, diagnostics& diag) {
  const auto* placed = std::get_if<placed_layer>(&line);
  if (placed) places.note(placed->layer.id, placed->layer.name);
  std::string id = placed ? placed->layer.id : std::string(), name = placed ? placed->layer.name : std::string();
  auto taken = plan.take(std::move(line), diag);
  if (taken && *taken == plan_progress::taken::queued)
    act.log(action_types::node::queued, {{"layer", std::move(id)}, {"name", std::move(name)}});
  return taken;
}

// A shard line was taken: the shard that waits for it may start. A layer this node has finished already
// (it was in the cache) makes no copy of it for the node's children either.
void shard_came(tracing::action& act, shared_state& s, const plan_progress& plan,
                const std::optional<plan_shard>& shard) {
  if (shard) {
    act.log(action_types::node::shard_line, {{"layer", shard->layer}, {"shard", shard->index + 1}});
    if (plan.has_finished(shard->layer)) no_copy_of(s.ctx.serve_dir, shard->sha256);
  }
  s.shards_came.notify();
}

std::optional<plan_shard> shard_of(const plan_line& line) {
  const auto* shard = std::get_if<plan_shard>(&line);
  return shard ? std::optional<plan_shard>(*shard) : std::nullopt;
}

// Reads the plan's lines until its end line, queueing each layer the first time its id comes.
asio::awaitable<void> read_plan(tracing::action& act, line_source& next, arrivals& in, shared_state& s) {
  co_await net::accept_cancellation();
  diagnostics diag;
  auto fail = [&](error_code ec) {
    in.plan.reading_failed(ec, diag);
    in.stop(s);
  };
  for (;;) {
    auto line = co_await next(diag);
    if (!line) co_return fail(line.error());
    if (!*line) {
      diag.set("the plan ended before its end line (ferry stopped, or its pack failed)");
      co_return fail(make_error_code(errc::bad_plan));
    }
    auto parsed = parse_plan_line(**line, diag);
    if (!parsed) co_return fail(parsed.error());
    if (took_peer(s, act, *parsed)) continue;
    const auto shard = shard_of(*parsed);
    auto taken = take_line(act, s.cache, in.plan, std::move(*parsed), diag);
    if (!taken) co_return in.stop(s);
    if (*taken == plan_progress::taken::shard) shard_came(act, s, in.plan, shard);
    if (*taken != plan_progress::taken::queued && *taken != plan_progress::taken::ended) continue;
    const bool ended = *taken == plan_progress::taken::ended;
    if (!co_await wake_workers(in, ended)) co_return;  // closed: a layer failed, or cancelled
    if (ended) co_return;
  }
}

// A lazy plan's reader: the same lines, and the catalogue; it reads on after the end line, and after a
// failure (the command still runs, and its imports are answered), until work_done or the input's end.
asio::awaitable<void> read_lazy_plan(line_source& next, arrivals& in, shared_state& s, lazy_start& lazy) {
  co_await net::accept_cancellation();
  diagnostics diag;
  auto stop = [&](error_code ec) {
    if (!in.plan.stopping()) in.plan.reading_failed(ec, diag);
    in.stop(s);
    lazy.stopped(describe(ec, diag));
    lazy.finish(in, s);
  };
  for (;;) {
    auto line = co_await next(diag);
    if (!line) co_return stop(line.error());
    if (!*line) {
      if (in.plan.ended() || in.plan.stopping()) co_return lazy.finish(in, s);
      diag.set("the plan ended before its end line (ferry stopped, or its pack failed)");
      co_return stop(make_error_code(errc::bad_plan));
    }
    if ((*line)->empty()) continue;  // the feed's keep-alive (agent/materialise/layer_feed.cpp)
    auto parsed = parse_plan_line(**line, diag);
    if (!parsed) co_return stop(parsed.error());
    if (took_peer(s, lazy.act, *parsed)) continue;
    if (std::holds_alternative<plan_work_done>(*parsed)) co_return lazy.finish(in, s);
    if (in.plan.stopping()) continue;  // the plan stopped short: the rest is not fetched
    const auto shard = shard_of(*parsed);
    auto taken = take_line(lazy.act, s.cache, in.plan, std::move(*parsed), diag);
    if (!taken) {
      in.stop(s);  // a shard that waits for its line gives up
      lazy.stopped(describe(taken.error(), diag));
      continue;
    }
    if (*taken == plan_progress::taken::shard) {
      shard_came(lazy.act, s, in.plan, shard);
      continue;
    }
    if (*taken == plan_progress::taken::site) {
      auto file = write_site(lazy.cache, *in.plan.site(), diag);
      if (!file) co_return stop(file.error());
      lazy.site_file = std::move(*file);
      continue;
    }
    if (*taken == plan_progress::taken::catalogue) {
      for (const auto& e : in.plan.catalogue()->layers) lazy.cache.note(e.id, e.name);
      lazy.gate.open(*in.plan.catalogue(), [&](const std::string& id) { return lazy.cache.layer_dir(id); });
      lazy.look();
      continue;
    }
    if (*taken != plan_progress::taken::queued && *taken != plan_progress::taken::ended) continue;
    in.wake();  // a worker a held layer keeps waiting may take this one
    // Closed (a layer failed): the plan is read on all the same, for work_done.
    co_await wake_workers(in, *taken == plan_progress::taken::ended);
  }
}

// One of the plan's workers: takes queued layers one at a time until the queue closes. A layer that
// failed for good stops the rest: no new shard starts, no new layer is taken, and the plan is not read on.
asio::awaitable<void> work_on_layers(tracing::action& act, shared_state& s, arrivals& in,
                                     const std::function<void()>& stop_reading, lazy_start* lazy) {
  co_await net::accept_cancellation();
  for (;;) {
    error_code ec;
    const auto token = co_await in.queue.async_receive(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || token == arrivals::no_more) co_return;
    const auto* layer = co_await next_layer(in);
    if (!layer) co_return;
    diagnostics diag;
    auto got = co_await materialise_layer(act, s, *layer, diag);
    if (lazy) lazy->ended(*layer, got, diag);
    in.plan.finished(*layer, std::move(got), diag);
    in.wake();
    if (in.plan.stopping() && !s.stop) {
      in.stop(s);
      if (!lazy) stop_reading();
      else lazy->stopped(fmt::format("the plan stopped: layer {} failed", layer->name));
    }
    if (lazy && lazy->never_starts()) {
      lazy->finish(in, s);
      stop_reading();
    }
  }
}

result<std::string> empty_workdir(const layer_places& cache, diagnostics& diag) {
  // A command without a workspace runs in an empty directory of the cache, never in a layer.
  auto dir = cache.dir() + "/empty";
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    diag.set(fmt::format("cannot create {}: {}", dir, std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  return dir;
}

asio::awaitable<result<materialised>> materialise_lazily(tracing::action& act, shared_state& s, arrivals& in,
                                                         layer_places& cache, const plan_header& header,
                                                         line_source& next, const std::function<void()>& stop_reading,
                                                         diagnostics& diag) {
  lazy_start lazy(act, cache);
  in.plan.keep_going_after_failures();
  auto hook = install_python_files(cache.dir(), diag);
  if (!hook) co_return hook.error();
  lazy.hook_dir = std::move(*hook);
  auto workdir = empty_workdir(cache, diag);
  if (!workdir) co_return workdir.error();
  lazy.workdir = std::move(*workdir);
  auto server = import_server::open(co_await asio::this_coro::executor, lazy.gate,
                                    [&](const std::vector<std::string>& ids) {
                                      for (const auto& id : ids) in.plan.prefer(id);
                                      in.wake();
                                    },
                                    diag);
  if (!server) co_return server.error();
  lazy.server = std::move(*server);
  if (const auto* user = cache.user(); user) {
    // The tenant's command alone reaches the socket: its directory is its user's, 0700.
    const auto& socket = lazy.server->socket_path();
    const auto dir = socket.substr(0, socket.rfind('/'));
    if (::lchown(dir.c_str(), user->uid, user->gid) != 0 || ::lchown(socket.c_str(), user->uid, user->gid) != 0) {
      diag.set(fmt::format("cannot hand the import hook's socket {} to {}: {}", socket, user->name,
                           std::strerror(errno)));
      co_return make_error_code(errc::tenant_failed);
    }
  }
  std::vector<asio::awaitable<void>> layers;
  for (int i = 0; i < in.workers; ++i) layers.push_back(work_on_layers(act, s, in, stop_reading, &lazy));
  std::vector<asio::awaitable<void>> work;
  work.push_back(read_lazy_plan(next, in, s, lazy));
  work.push_back(net::stoppable(net::run_all(std::move(layers)), lazy.stop_work));
  work.push_back(lazy.server->serve(act));
  co_await net::run_all(std::move(work));
  if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
  // Layers cut short because the command ended are not failures; one that failed on its own is.
  if (auto failed = in.plan.failure(diag); failed && *failed != asio::error::operation_aborted) co_return *failed;
  materialised m = in.plan.counts();
  m.lazy = true;
  m.cache_dir = cache.dir();
  const auto ws = lazy.gate.workspace();
  m.workdir = ws ? lazy.gate.dir(*ws) : lazy.workdir;
  m.imported = lazy.gate.imported_layers();
  m.layers_left = lazy.left;
  for (const auto& e : cache.evict(header.cache_cap, in.plan.ids())) {
    act.log(action_types::node::evicted, {{"layer", e.id}, {"disk_bytes", e.disk_bytes}});
    ++m.layers_evicted;
  }
  co_return m;
}

// The node's own cache, or with a tenant (made on first use) the shared cache and the tenant's own.
result<layer_places> places_of(const plan_header& header, diagnostics& diag) {
  if (header.tenant.empty()) {
    auto cache = layer_cache::open(header.cache_dir, diag);
    if (!cache) return cache.error();
    return layer_places(std::move(*cache));
  }
  auto user = ensure_tenant_user(header.tenant, diag);
  if (!user) return user.error();
  // Every tenant reads what the node program writes: whatever root's umask, 0755 and 0644.
  ::umask(022);
  const auto shared_dir = header.cache_dir.empty() ? std::string(shared_cache_dir) : header.cache_dir;
  auto shared = layer_cache::open(shared_dir, diag, 0755);
  if (!shared) return shared.error();
  if (::chmod(shared->dir().c_str(), 0755) != 0) {
    diag.set(fmt::format("cannot open {} to the node's tenants: {}", shared->dir(), std::strerror(errno)));
    return make_error_code(errc::tenant_failed);
  }
  auto dir = tenant_dir(shared->dir(), *user, diag);
  if (!dir) return dir.error();
  auto own = layer_cache::open(*dir, diag, 0755);
  if (!own) return own.error();
  return layer_places(std::move(*shared), std::move(*own), std::move(*user));
}

}  // namespace

asio::awaitable<result<materialised>> materialise_layers(tracing::action& act, fetch_context& ctx,
                                                          const plan_header& header, line_source next,
                                                          std::function<void()> stop_reading, diagnostics& diag) {
  auto cache = places_of(header, diag);
  if (!cache) co_return cache.error();
  act.log(action_types::node::cache, {{"cache_dir", cache->shared_dir()}});
  if (const auto* user = cache->user()) act.log(action_types::node::tenant, {{"user", user->name}, {"dir", cache->dir()}});
  auto io = co_await asio::this_coro::executor;
  shared_state s(ctx, *cache, io);
  s.token = header.peer_token;
  // The copies a node keeps for its children stay in the node's own cache, where `serve` looks: root's.
  if (!header.serve_id.empty()) {
    auto own = layer_cache::open(header.cache_dir, diag);
    if (!own) co_return own.error();
    ctx.serve_dir = serve_dir_of(own->dir(), header.serve_id);
  }
  // However this ends, the node's server stops holding peers' requests for copies that will not come.
  struct over_at_end {
    const std::string& dir;
    ~over_at_end() { copies_over(dir); }
  } over{ctx.serve_dir};
  // Layers in progress at once: each holds its lock and its directory open.
  const int workers = std::max(1, ctx.limits.parallelism);
  arrivals in(io, workers);
  if (header.lazy) co_return co_await materialise_lazily(act, s, in, *cache, header, next, stop_reading, diag);
  std::vector<asio::awaitable<void>> work;
  work.push_back(read_plan(act, next, in, s));
  for (int i = 0; i < workers; ++i) work.push_back(work_on_layers(act, s, in, stop_reading, nullptr));
  co_await net::run_all(std::move(work));
  if (auto failed = in.plan.failure(diag)) co_return *failed;
  if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
  auto env = in.plan.environment([&](const std::string& id) { return cache->layer_dir(id); }, diag);
  if (!env) co_return env.error();
  materialised m = std::move(*env);
  m.cache_dir = cache->dir();
  // The hook's directory holds the API's worker too, which a command may run without a site.
  auto hook = install_python_files(cache->dir(), diag);
  if (!hook) co_return hook.error();
  m.hook_dir = std::move(*hook);
  if (const auto* site = in.plan.site()) {
    auto file = write_site(*cache, *site, diag);
    if (!file) co_return file.error();
    m.site_file = std::move(*file);
  }
  if (m.workdir.empty()) {
    auto empty = empty_workdir(*cache, diag);
    if (!empty) co_return empty.error();
    m.workdir = std::move(*empty);
  }
  for (const auto& e : cache->evict(header.cache_cap, in.plan.ids())) {
    act.log(action_types::node::evicted, {{"layer", e.id}, {"disk_bytes", e.disk_bytes}});
    ++m.layers_evicted;
  }
  co_return m;
}

}  // namespace ferry::agent::node
