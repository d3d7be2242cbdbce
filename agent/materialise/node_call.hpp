#pragma once
// One run of a node program subcommand (`ferry-node materialise`, `ferry-node stage`) on a node, as the
// workstation sees it: the command line for the program by its digest, a plan on its stdin, and its
// stdout, Eliot messages continuing the caller's task, written as they arrive to the node's own trace
// file beside ferry's (<trace>.node-<node>-<n>.jsonl: each process writes its own file). The end of the
// program's root action is kept: it says what the node did, or why it failed.
//
// A node that lacks this build of the program gets it (agent/provide/node_program.hpp) and the call is made once
// more; the level that was handed to the missing program holds a ferry:node:absent action, so that the
// task has no hole in it.
#include "agent/node/plan.hpp"
#include "agent/provide/node_program.hpp"
#include "config/settings.hpp"
#include "net/node_link.hpp"
#include "net/exec_streams.hpp"
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::agent {

namespace asio = boost::asio;

struct node_call {
  std::shared_ptr<const node_program> program;  // must be set
  std::string cache_dir;   // on the node; empty: ${XDG_CACHE_HOME:-$HOME/.cache}/ferry
  std::string node_path;   // PATH for the program's command line; empty: the login's
  std::string subcommand;  // "materialise", "stage"
  std::string_view root_type;  // the action type of the program's root (tracing/action_types.hpp)
  // Each message the program writes, as it arrives (after it went to the node's trace file).
  std::function<void(const boost::json::object&)> on_message;
};

struct node_answer {
  net::exit_info exit;
  std::optional<boost::json::object> end;  // the root action's end message, if it came
  std::string err;                         // the program's stderr (its last 16 KiB)

  bool succeeded() const;
};

// The deadlines and retries the node program works within, from config: net.connect_timeout,
// agent.download_timeout (one read), agent.cache_lock_timeout, net.retry.*, and its grace after TERM
// (node_shutdown_grace). Parallelism and sizes are the caller's.
node::node_limits limits_of(const config::settings& settings);

// How long the node program has after TERM to end its actions before it exits regardless: half of the
// shorter of agent.shutdown_grace and ssh.kill_grace, so that it is done before ferry sends KILL and
// before ferry itself stops waiting for its last lines.
std::chrono::milliseconds node_shutdown_grace(const config::settings& settings);

// The node's own trace file for `act`'s node steps; a discarded trace (no file) discards the node's too.
std::unique_ptr<tracing::sink> node_trace(const tracing::action& act, std::string_view node);

// Makes the program's stdin for one call: the plan, with `task_id` as the task its actions continue.
using node_input = std::function<std::unique_ptr<net::input_source>(const std::string& task_id)>;

// Input that is a text made for the task id (a plan of a few lines), kept for as long as the call reads it.
node_input text_input(std::function<std::string(const std::string& task_id)> text);

// Runs the call under `act`. Fails only when the link fails or the call is cancelled (the program is
// then stopped), or the program could not be loaded or installed (errc::node_lacks_tools); the program's
// own failure is in the answer.
asio::awaitable<result<node_answer>> call_node(tracing::action& act, net::node_link& link, const node_call& call,
                                               const node_input& input, tracing::sink& trace, diagnostics& diag);

// Runs `ferry-node version`, and installs the program when that finds it missing.
asio::awaitable<result<void>> ensure_node_program(tracing::action& act, net::node_link& link,
                                                  const node_call& call, diagnostics& diag);

// The program's failure as an error: its reason (from its root action's end, else its stderr) in `diag`,
// prefixed by the node, under the node program's or net's own error code when the trace names one,
// else `fallback`.
error_code node_failure(const node_answer& answer, std::string_view node, error_code fallback, diagnostics& diag);

// Fields of the root action's end.
std::string end_text(const node_answer& answer, std::string_view key);
std::uint64_t end_count(const node_answer& answer, std::string_view key);

}  // namespace ferry::agent
