#pragma once
// `ferry api`: the agent half of the Python API (docs/python-api.md). The `ferry` package writes frames
// on this process's stdin (functions, blobs, tasks, cancels, the end) and reads frames on its stdout
// (results, output, status). Meanwhile the job does what `ferry run` does once (pack, nodes, layers, lazy
// start), and then keeps `per_node` workers on each node: Python processes, started once, that run task
// after task over one exec channel each (api_schedule.hpp decides which worker runs what).
//
// Trace: the job's action (`ferry:api`) holds the job's steps, a `ferry:api:worker` per worker, a
// `ferry:api:blob` per stored argument, and a `ferry:agent:task` per task sent to a worker (its eliot id
// goes with the task: FERRY_TASK_ID inside the task continues it), as a map's tasks are; a
// `ferry:api:blob:offer` message says where each worker was told to fetch a blob first.
//
// Blobs fan out as the layers do (agent/materialise/job_fanout.hpp): in a job that fans out, a worker whose
// node has a parent fetches from the parent's server, and a worker of the parent is asked to fetch the blob
// first. The servers run as long as their node's work, which is the session's.
#include "agent/api/api_schedule.hpp"
#include "agent/api/frame.hpp"
#include "agent/cli/command_context.hpp"
#include "agent/job/job.hpp"
#include "agent/run/task_command.hpp"
#include "net/notifier.hpp"
#include "net/task_group.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace ferry::agent::api {

namespace asio = boost::asio;

struct api_options {
  std::size_t nodes = 1;     // nodes the job starts
  std::size_t per_node = 1;  // workers on each
  unsigned retries = 0;      // further attempts of a task whose worker was lost
  env_vars vars;             // the user's --env, for every worker
  std::string python = "python3";  // the node's interpreter
};

class api_session {
 public:
  // `in` and `out` are the client's pipes (the session owns them).
  api_session(const command_context& ctx, tracing::action& act, job& j, api_options options, int in, int out);

  // Until the client ended its input and every result is out, the client went away, or the job failed
  // (the client gets an `X` frame). The command's exit code.
  asio::awaitable<int> run();

 private:
  struct blob {
    std::string sha256;
    std::string key;  // in the storage.url bucket; each offer presigns it anew (a URL expires)
    std::uint64_t size = 0;
  };
  struct worker_state;
  class worker_sink;

  asio::awaitable<bool> read_client();  // true: the client sent `E`
  asio::awaitable<void> write_client();
  asio::awaitable<void> run_job();
  asio::awaitable<void> on_node(job_node& jn);
  asio::awaitable<void> worker(job_node& jn, std::size_t slot);
  asio::awaitable<void> other_workers(job_node& jn);
  asio::awaitable<void> feed_worker(worker_state& w, const bool& over);
  asio::awaitable<void> store_blob(std::uint64_t id, std::string bytes);
  // The `B` frame of blob `id` for `w`, once a worker (appended to `out`): with its parent's server as
  // the first source when the job fans out and a worker on the parent was asked to fetch it. `fetch`:
  // the worker fetches it now, for the children of its node, rather than when a task needs it.
  void offer_blob(std::string& out, worker_state& w, std::uint64_t id, bool fetch);
  // Some worker on `node` has blob `id` or is asked to fetch it now, or its first worker will be.
  void fetch_on(const std::string& node, std::uint64_t id);

  // false: a frame that breaks the protocol (the session ends with an `X` frame).
  bool from_client(frame f);
  // false: a frame that breaks the protocol (the worker is ended).
  bool from_worker(worker_state& w, frame f);
  void worker_stderr(worker_state& w, std::string_view bytes);
  void worker_lost(worker_state& w, const std::string& why);
  void send(char kind, std::uint64_t id, std::string_view head, std::string_view rest = {});
  void status(boost::json::object event);
  void fatal(const std::string& text);
  std::size_t ahead() const;

  const command_context& ctx_;
  tracing::action& act_;
  job& job_;
  api_options options_;
  asio::posix::stream_descriptor in_;
  asio::posix::stream_descriptor out_;
  api_schedule schedule_;
  net::notifier wake_;       // workers: a task queued, the input's end, a worker's answer
  net::notifier written_;    // the client's writer: something to send, or the end
  std::string to_client_;    // frames not yet written
  bool closing_ = false;     // nothing more will be sent: the writer ends once to_client_ is out
  bool failed_ = false;      // an `X` frame was sent
  std::unordered_map<std::uint64_t, std::string> functions_;  // id -> the pickled function
  std::unordered_map<std::uint64_t, blob> blobs_;             // stored blobs
  std::unordered_map<std::uint64_t, tracing::action> tasks_;  // task id -> its action while a worker has it
  std::unordered_map<std::string, std::vector<worker_state*>> on_node_;  // node -> its running workers
  std::unordered_map<std::string, std::vector<std::uint64_t>> to_fetch_;  // node -> blobs for its first worker
  net::task_group uploads_;
  std::size_t next_worker_ = 0;
  std::size_t slots_ = 0;     // workers that said hello and are not lost
  std::unordered_set<std::string> first_up_;  // nodes whose first worker is up (or ended): the rest start
  std::size_t nodes_ = 0;     // nodes with a worker
  double task_seconds_ = 0;   // a moving mean of what a task takes on a worker: how far ahead to send
};

}  // namespace ferry::agent::api
