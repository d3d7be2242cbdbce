#include "agent/api/api_session.hpp"

#include "agent/cli/exit_code.hpp"
#include "agent/error.hpp"
#include "agent/node/python_files.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/run/node_output.hpp"
#include "agent/run/task_outcome.hpp"
#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "net/exec_streams.hpp"
#include "net/node_link.hpp"
#include "net/offload.hpp"
#include "net/run_all.hpp"
#include "packaging/layer.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include <unistd.h>

namespace ferry::agent::api {
namespace {

namespace json = boost::json;
using clock = std::chrono::steady_clock;

// How the node's python3 runs the worker file: as `python3 -c` runs a program, so that sys.path[0] is the
// working directory (the workspace), as it was when the environment was packed.
constexpr std::string_view bootstrap =
    "import sys;p=sys.argv[1];del sys.argv[0];__file__=p;exec(compile(open(p,'rb').read(),p,'exec'))";

// How long the tasks a worker holds beyond the one it runs may take, about: enough to hide the round trip
// to the worker when tasks are short, and none when they are long, so that the last ones never wait behind
// a busy worker while another is idle. Before any task has been timed, a worker holds only the one it runs:
// the first tasks of a map of long ones must spread over every worker.
constexpr double ahead_seconds = 0.05;
constexpr std::size_t max_ahead = 64;

// ": LINE" for the last line of `text`, or nothing.
std::string last_line(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.empty()) return {};
  const auto nl = text.rfind('\n');
  return ": " + std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

// An `O` frame's head for the client: the stream (1 stdout, 2 stderr), then the node's name.
std::string output_head(char stream, std::string_view node) {
  node = node.substr(0, 255);
  std::string head(1, stream);
  head.push_back(static_cast<char>(node.size()));
  head.append(node);
  return head;
}

std::string outcome_text(std::string_view payload) {
  return payload.size() > 1 ? std::string(payload.substr(1)) : std::string();
}

}  // namespace

// One worker: a Python process on a node, its channel, and what it has been sent.
struct api_session::worker_state {
  worker_state(asio::any_io_executor io, std::size_t id, std::string node) : input(std::move(io)), id(id),
                                                                             node(std::move(node)) {}
  net::stream_source input;
  std::size_t id;
  std::string node;
  std::unordered_set<std::uint64_t> functions;  // sent to it already
  std::unordered_set<std::uint64_t> blobs;
  bool hello = false;
  clock::time_point busy_since{};  // when its current run of work began, or its last answer came
  std::string err_pending;         // stderr bytes after the last newline
  std::string err_tail;            // its last stderr lines: why it ended, when it did
  std::string blob_dir;            // where the node keeps blobs: <node cache>/blobs
};

// The worker's stdout is frames; its stderr is what its process wrote outside Python's sys.stdout and
// sys.stderr (C code, the interpreter's own messages).
class api_session::worker_sink final : public net::output_sink {
 public:
  worker_sink(api_session& s, worker_state& w) : s_(s), w_(w) {}
  asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override {
    if (stream == net::output_stream::err) {
      s_.worker_stderr(w_, std::string_view(bytes.data(), bytes.size()));
      co_return error_code{};
    }
    reader_.feed(bytes);
    while (auto f = reader_.next()) {
      // A frame this agent does not know: a worker of another version, which cannot be trusted to answer.
      if (!s_.from_worker(w_, std::move(*f))) co_return error_code(errc::bad_frame);
    }
    co_return reader_.bad() ? error_code(errc::bad_frame) : error_code{};
  }

 private:
  api_session& s_;
  worker_state& w_;
  frame_reader reader_;
};

api_session::api_session(const command_context& ctx, tracing::action& act, job& j, api_options options, int in,
                         int out)
    : ctx_(ctx), act_(act), job_(j), options_(std::move(options)), in_(ctx.io, in), out_(ctx.io, out),
      schedule_(options_.retries), wake_(ctx.io), written_(ctx.io), uploads_(ctx.io) {}

void api_session::send(char kind, std::uint64_t id, std::string_view head, std::string_view rest) {
  append_frame(to_client_, kind, id, head, rest);
  written_.notify();
}

void api_session::status(json::object event) { send('S', 0, json::serialize(event)); }

void api_session::fatal(const std::string& text) {
  if (failed_) return;
  failed_ = true;
  send('X', 0, text);
}

asio::awaitable<void> api_session::write_client() {
  co_await net::accept_cancellation();
  std::string sending;
  for (;;) {
    if (to_client_.empty()) {
      if (closing_ || co_await net::cancelled()) break;
      error_code ec;
      co_await written_.wait(ec);
      continue;
    }
    sending.clear();
    sending.swap(to_client_);
    error_code ec;
    co_await asio::async_write(out_, asio::buffer(sending), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;  // the client is gone: nothing more can reach it
  }
  out_.close();
}

bool api_session::from_client(frame f) {
  switch (f.kind) {
    case 'F':
      functions_[f.id] = std::move(f.payload);
      return true;
    case 'B':
      if (f.payload.empty()) return false;
      if (!closing_) uploads_.spawn(store_blob(f.id, std::move(f.payload)));  // else no task could use it
      return true;
    case 'T': {
      auto t = task_from(f.id, std::move(f.payload));
      if (!t || !functions_.contains(t->function)) return false;
      t->submitted_at = unix_now();
      schedule_.add(std::move(*t));
      wake_.notify();
      return true;
    }
    case 'C':
      schedule_.cancel(f.id);
      return true;
    case 'E':
      schedule_.input_ended();
      wake_.notify();
      return true;
  }
  return false;
}

asio::awaitable<bool> api_session::read_client() {
  co_await net::accept_cancellation();
  frame_reader reader;
  std::array<char, 64 * 1024> buffer;
  for (;;) {
    error_code ec;
    const auto n = co_await in_.async_read_some(asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;  // the client closed its end without `E`, or Ctrl-C
    reader.feed(std::span<const char>(buffer.data(), n));
    while (auto f = reader.next()) {
      const char kind = f->kind;
      if (!from_client(std::move(*f))) {
        fatal(fmt::format("ferry api: a frame of kind '{}' from the ferry package cannot be read: is the package "
                          "the same version as this ferry?", kind));
        co_return false;
      }
      if (kind == 'E') co_return true;
    }
    if (reader.bad()) {
      fatal("ferry api: the ferry package announced a frame over 1 GiB");
      co_return false;
    }
  }
}

asio::awaitable<void> api_session::store_blob(std::uint64_t id, std::string bytes) {
  auto& s3 = job_.storage();
  const auto sha = co_await net::offload(ctx_.cpu, [&bytes] { return net::hex_sha256(bytes); });
  const auto& url = *ctx_.config.storage.url;
  const auto key = packaging::key_prefix(url.key) + "blobs/" + sha;
  auto act = act_.child(action_types::api::blob, {{"blob", id}, {"bytes", bytes.size()}, {"sha256", sha}});
  diagnostics diag;
  bool stored = false;
  if (auto there = co_await s3.head_object(act, url.bucket, key, diag); !there) {
    diag = {};
    auto put = co_await s3.put_object(act, url.bucket, key, std::span<const char>(bytes.data(), bytes.size()), diag);
    if (!put) {
      act.fail(put.error(), diag);
      if (!co_await net::cancelled()) fatal(fmt::format("ferry api: an argument could not be stored: {}",
                                                        describe(put.error(), diag)));
      wake_.notify();
      co_return;
    }
    stored = true;
  }
  blobs_[id] = blob{sha, key, bytes.size()};
  act.succeed({{"stored", stored}});
  schedule_.blob_stored(id);
  wake_.notify();
}

void api_session::offer_blob(std::string& out, worker_state& w, std::uint64_t id, bool fetch) {
  w.blobs.insert(id);
  const auto& info = blobs_.at(id);
  // A source that sends nothing for agent.download_timeout is given up on, as a layer's is.
  const auto timeout = std::chrono::duration<double>(ctx_.config.values.agent.download_timeout).count();
  // Presigned now, not when it was stored: a node that comes an hour into the session gets a live URL (a
  // credential: on the worker's stdin alone, never traced).
  const auto& bucket = ctx_.config.storage.url->bucket;
  json::object o{{"sha256", info.sha256}, {"url", job_.storage().presign_get(bucket, info.key)}, {"size", info.size},
                 {"path", w.blob_dir + "/" + info.sha256}, {"timeout", timeout}};
  if (fetch) o["fetch"] = true;
  // In a job that fans out, a blob goes the way its layers went: from the parent's server, which waits for
  // a blob that one of its node's workers fetches (and asks storage for nothing itself).
  std::string source = "storage";
  const auto* fan = job_.fanout();
  if (fan) {
    const auto parent = fan->parent_of(w.node);
    auto server = fan->source_of(w.node);
    if (parent && !server.empty()) {
      fetch_on(*parent, id);
      source = server;
      o["peer"] = server + "/blobs/" + info.sha256;
      o["token"] = fan->token();  // the job's secret, on the worker's stdin alone: never traced
    }
  }
  act_.log(action_types::api::offer, {{"blob", id}, {"node", w.node}, {"source", source}, {"fetch", fetch}});
  append_frame(out, 'B', id, json::serialize(o));
}

void api_session::fetch_on(const std::string& node, std::uint64_t id) {
  const auto it = on_node_.find(node);
  if (it == on_node_.end() || it->second.empty()) {
    // Its workers have not started (they do once its own layers are there): the first one fetches it. A
    // node whose server listens and that never gets a worker ends its server with its steps, and its
    // children turn to storage.
    auto& ids = to_fetch_[node];
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    return;
  }
  for (auto* w : it->second)
    if (w->blobs.contains(id)) return;  // it fetches the blob for a task of its own
  auto& w = *it->second.front();
  std::string frame;
  offer_blob(frame, w, id, true);
  w.input.write(frame);
}

std::size_t api_session::ahead() const {
  if (task_seconds_ <= 0) return 0;
  return std::min(static_cast<std::size_t>(ahead_seconds / task_seconds_), max_ahead);
}

bool api_session::from_worker(worker_state& w, frame f) {
  switch (f.kind) {
    case 'H':
      if (!w.hello) {
        w.hello = true;
        ++slots_;
        status({{"event", "slots"}, {"slots", slots_}, {"nodes", nodes_}});
        first_up_.insert(w.node);  // the node's other workers may start (on_node)
        wake_.notify();
      }
      return true;
    case 'O':
      if (f.payload.empty()) return false;
      send('O', f.id, output_head(f.payload[0], w.node), std::string_view(f.payload).substr(1));
      return true;
    case 'R': {
      const auto now = clock::now();
      const double took = std::chrono::duration<double>(now - w.busy_since).count();
      w.busy_since = now;
      task_seconds_ = task_seconds_ <= 0 ? took : 0.8 * task_seconds_ + 0.2 * took;
      if (f.payload.empty()) return false;
      if (!schedule_.answered(w.id, f.id)) return true;  // not this worker's to answer: dropped
      if (auto a = tasks_.find(f.id); a != tasks_.end()) {
        const char outcome = f.payload[0];
        if (outcome == 0) {
          a->second.succeed();
        } else {
          a->second.fail_exception(outcome == 1 ? "raised" : "lost", outcome == 1 ? "the task raised" :
                                                                                    outcome_text(f.payload));
        }
        tasks_.erase(a);
      }
      send('R', f.id, f.payload);
      wake_.notify();
      return true;
    }
  }
  return false;
}

void api_session::worker_stderr(worker_state& w, std::string_view bytes) {
  // Whole lines, each given to the task the worker runs now (a worker runs its tasks in order).
  w.err_pending.append(bytes);
  const auto last = w.err_pending.rfind('\n');
  if (last == std::string::npos) return;
  const std::string_view lines = std::string_view(w.err_pending).substr(0, last + 1);
  w.err_tail.append(lines);
  if (w.err_tail.size() > 4096) w.err_tail.erase(0, w.err_tail.size() - 4096);
  if (const auto task = schedule_.running(w.id)) {
    send('O', *task, output_head(2, w.node), lines);
  } else {
    // No task of its own (the worker's start, or its end): the terminal's, with the node's name.
    std::string text;
    for (std::size_t at = 0; at < lines.size();) {
      const auto nl = lines.find('\n', at);
      text += fmt::format("[{}] {}", w.node, lines.substr(at, nl + 1 - at));
      at = nl + 1;
    }
    (void)write_all(STDERR_FILENO, text);
  }
  w.err_pending.erase(0, last + 1);
}

void api_session::worker_lost(worker_state& w, const std::string& why) {
  if (w.hello) {
    --slots_;
    status({{"event", "lost"}, {"node", w.node}, {"why", why}});
    status({{"event", "slots"}, {"slots", slots_}, {"nodes", nodes_}});
  }
  w.hello = false;
  // Its tasks' attempts are over: each that goes again does so under an action of its own.
  const auto held = schedule_.holding(w.id);
  for (auto id : held) {
    if (auto a = tasks_.find(id); a != tasks_.end()) {
      a->second.fail(make_error_code(errc::worker_failed), why);
      tasks_.erase(a);
    }
  }
  const auto failed = schedule_.worker_lost(w.id);
  for (const auto& f : failed) {
    const auto text = fmt::format("node {}: {} (tried {} time{})", w.node, why, f.attempts, f.attempts == 1 ? "" : "s");
    send('R', f.id, std::string_view("\x02", 1), text);
  }
  for (auto id : held) {
    if (std::any_of(failed.begin(), failed.end(), [id](const auto& f) { return f.id == id; })) continue;
    act_.log(action_types::api::retry, {{"task", id}, {"node", w.node}});
    status({{"event", "retry"}, {"task", id}, {"why", fmt::format("node {}: {}", w.node, why)}});
  }
  wake_.notify();
}

asio::awaitable<void> api_session::feed_worker(worker_state& w, const bool& over) {
  co_await net::accept_cancellation();
  std::string out;
  for (;;) {
    if (over || co_await net::cancelled()) co_return;
    if (schedule_.finished()) break;
    out.clear();
    while (schedule_.held_by(w.id) < 1 + ahead()) {
      const auto* t = schedule_.take(w.id);
      if (!t) break;
      if (schedule_.held_by(w.id) == 1) w.busy_since = clock::now();
      if (w.functions.insert(t->function).second) append_frame(out, 'F', t->function, functions_.at(t->function));
      for (auto b : t->blobs) {
        if (w.blobs.contains(b)) continue;
        offer_blob(out, w, b, false);
      }
      auto task = act_.child(action_types::agent::task, {{"node", w.node},
                                                         {"submitted_at", t->submitted_at},
                                                         {"task", t->id},
                                                         {"attempt", t->attempts}});
      const auto eliot_id = task.hand_off_task_id();
      std::string head;
      put_u16(head, static_cast<std::uint16_t>(eliot_id.size()));
      head += eliot_id;
      append_frame(out, 'T', t->id, head, t->payload);
      tasks_.erase(t->id);
      tasks_.emplace(t->id, std::move(task));
    }
    if (!out.empty()) w.input.write(out);
    error_code ec;
    co_await wake_.wait(ec);
  }
  // Every task is over: the worker ends, and so does its channel.
  out.clear();
  append_frame(out, 'E', 0, {});
  w.input.write(out);
  w.input.close();
}

asio::awaitable<void> api_session::worker(job_node& jn, std::size_t slot) {
  const auto& node = jn.ready.node.id;
  worker_state w(co_await asio::this_coro::executor, next_worker_++, node);
  auto act = act_.child(action_types::api::worker, {{"node", node}, {"slot", slot}});
  const auto file = jn.env.hook_dir + "/" + node::worker_file;
  // The hook's directory is <node cache>/hook/<digest> (agent/node/python_files.hpp).
  w.blob_dir = std::filesystem::path(jn.env.hook_dir).parent_path().parent_path().string() + "/blobs";
  const auto line = task_command(jn.env, act.hand_off_task_id(), options_.vars,
                                 {options_.python, "-c", std::string(bootstrap), file});
  // The --env assignments come first on stdin, read by the node's shell before it starts Python.
  if (!line.input.empty()) w.input.write(line.input);
  // A node's workers, while they run: where its children's blobs are fetched (offer_blob). The first
  // fetches what its children were sent for before it started.
  auto& mates = on_node_[node];
  mates.push_back(&w);
  struct leave {
    std::vector<worker_state*>& mates;
    worker_state* w;
    ~leave() { std::erase(mates, w); }
  } leaving{mates, &w};
  if (auto pending = to_fetch_.extract(node)) {
    std::string frames;
    for (auto id : pending.mapped()) offer_blob(frames, w, id, true);
    w.input.write(frames);
  }
  worker_sink sink(*this, w);
  net::exec_request request;
  request.command = command_for(jn.ready.node, line.command);
  request.input = &w.input;
  request.output = &sink;
  diagnostics diag;
  bool over = false;
  result<net::exit_info> done = make_error_code(errc::worker_failed);
  auto exec_part = [&]() -> asio::awaitable<void> {
    done = co_await jn.ready.link->exec(act, request, diag);
    over = true;
    wake_.notify();
  };
  std::vector<asio::awaitable<void>> parts;
  parts.push_back(exec_part());
  parts.push_back(feed_worker(w, over));
  co_await net::run_all(std::move(parts));
  const bool clean = done && exit_code_of(*done) == 0;
  if (clean && schedule_.held_by(w.id) == 0) {
    act.succeed();
  } else if (co_await net::cancelled()) {
    act.fail(asio::error::operation_aborted, "cancelled");
  } else {
    if (!w.err_pending.empty()) worker_stderr(w, "\n");
    const auto why = !done ? describe(done.error(), diag)
                           : fmt::format("its worker ended with {}{}", done->describe(), last_line(w.err_tail));
    act.fail(done ? error_code(errc::worker_failed) : done.error(), why);
    worker_lost(w, why);
  }
  if (!w.err_pending.empty()) worker_stderr(w, "\n");
  // A first worker that ended without a hello: the node's others try (and are lost alike, or are not).
  if (slot == 0) {
    first_up_.insert(node);
    wake_.notify();
  }
}

asio::awaitable<void> api_session::other_workers(job_node& jn) {
  co_await net::accept_cancellation();
  const auto& node = jn.ready.node.id;
  for (;;) {
    if (schedule_.finished() || co_await net::cancelled()) co_return;
    if (first_up_.contains(node)) break;
    error_code ec;
    co_await wake_.wait(ec);
  }
  std::vector<asio::awaitable<void>> workers;
  for (std::size_t k = 1; k < options_.per_node; ++k) workers.push_back(worker(jn, k));
  co_await net::run_all(std::move(workers));
}

asio::awaitable<void> api_session::on_node(job_node& jn) {
  ++nodes_;
  // The node's first worker starts alone, the others once it is up: Pythons that start together on a small
  // node slow each other down, and the first result waits for the first of them.
  std::vector<asio::awaitable<void>> workers;
  workers.push_back(worker(jn, 0));
  if (options_.per_node > 1) workers.push_back(other_workers(jn));
  co_await net::run_all(std::move(workers));
  first_up_.erase(jn.ready.node.id);
  --nodes_;
  // This node's work is over: when it was the job's last task, no other node need begin.
  if (schedule_.finished()) {
    job_.work_ended();
    job_.work_over();
  }
}

asio::awaitable<void> api_session::run_job() {
  co_await net::accept_cancellation();
  diagnostics diag;
  auto ran = co_await job_.run(options_.nodes, [this](job_node& jn) { return on_node(jn); }, diag);
  const bool cancelled = co_await net::cancelled();
  // Why the nodes gave out (a node's Python of another version, a node lost): the caller's exception says
  // it, not only the terminal.
  std::string nodes_failed;
  for (const auto& f : job_.failures()) nodes_failed += (nodes_failed.empty() ? ": " : "; ") + f;
  if (!ran && !cancelled) fatal(describe(ran.error(), diag) + nodes_failed);
  // No node is left to run what remains.
  for (auto id : schedule_.fail_all()) {
    if (cancelled || failed_) break;
    send('R', id, std::string_view("\x02", 1), "no node was left to run it" + nodes_failed);
  }
  tasks_.clear();
  if (!ran || cancelled) {
    // The uploads stop with the job; what the client sends from now on goes nowhere.
    uploads_.cancel();
  }
  co_await uploads_.wait(true);
  closing_ = true;
  // Nothing the client sends now can run: its input is not read any more, so the session ends (the client
  // sees this process exit, and its pending futures fail with the reason it was sent).
  error_code ignored;
  in_.cancel(ignored);
  written_.notify();
}

asio::awaitable<int> api_session::run() {
  co_await net::accept_cancellation();
  const auto io = co_await asio::this_coro::executor;
  // The writer apart from the work: it ends by itself once the work said its last frame (an `X` too).
  net::task_group writer(io);
  net::task_group work(io);
  writer.spawn(write_client());
  work.spawn(run_job());
  const bool ended = co_await read_client();
  // Nothing more will come: nodes that have not begun need not, once every task is over.
  if (ended && schedule_.finished()) job_.work_over();
  // The client is gone, or broke the protocol: nobody would read the results. (When the job's own end
  // stopped the reading, it is over already.)
  if (!ended && !closing_) work.cancel();
  co_await work.wait(true);
  uploads_.cancel();  // any that a frame started after the job's end
  co_await uploads_.wait(true);
  co_await writer.wait(true);
  if (co_await net::cancelled()) co_return exit_code::interrupted;
  if (!ended || failed_) co_return exit_code::failure;
  co_return exit_code::success;
}

}  // namespace ferry::agent::api
