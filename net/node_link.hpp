#pragma once
// How ferry reaches a node it is logged in to: run commands there, forward ports to it, and put files on
// it. agent/ works through this interface alone; only the code that opens a link knows what carries it.
// Today that is SSH (net/ssh_node_link.hpp, opened by agent/node_access); a pod's link would be the
// Kubernetes API's exec and portforward subresources (docs/kubernetes.md).
//
// What every link keeps, whatever carries it:
// - exec runs a line for the node's POSIX sh, streams stdout and stderr to the request's sink and stdin
//   from its source with bounded memory (net/exec_streams.hpp), and ends with the exit status or the
//   signal (net/exit_info.hpp). Cancelling exec kills what the command started, then returns
//   operation_aborted (net/exec_lifecycle.hpp decides when and how: TERM, ssh.kill_grace, then KILL).
// - The channel stays open as long as the command runs, with stdin and stdout as byte streams, so a
//   long-lived worker talks over one exec: its stdin is a stream_source the caller writes to as requests
//   come, its stdout a sink that reads the replies as they come. Neither waits for the other.
// - A request with `as_user` runs its command as that Unix user on the node, not as the user the link
//   logged in as (the tenants of a shared node). How is the link's to say (for SSH: sudo, see there).
// - A link is shared (std::shared_ptr): each holder keeps it open, and it closes when the last lets go.
//   close() ends it at once; what runs on it fails.
//
// Everything here runs on the link's executor, ferry's single I/O thread.
#include "net/exec_streams.hpp"
#include "net/exit_info.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace ferry::net {

struct exec_request {
  std::string command;            // a line for the node's sh (net/shell_quote.hpp builds one from an argv)
  input_source* input = nullptr;  // stdin; none: stdin is at its end from the start
  output_sink* output = nullptr;  // stdout and stderr; none: they are read and dropped
  std::string as_user;            // empty: the user the link logged in as
};

// Where a forwarded connection goes.
struct forward_target {
  std::string host;  // as the node resolves it: its own private address, or 127.0.0.1
  std::uint16_t port = 0;
};

struct transfer_result {
  std::uint64_t bytes = 0;
  std::string sha256;  // lowercase hex, as sha256sum prints it
};

class node_link {
 public:
  virtual ~node_link() = default;

  // The node's id, as messages and traces name it.
  virtual const std::string& node() const = 0;
  // Ends the link now (see above). Idempotent.
  virtual void close() = 0;

  // Runs one command to its end (see above). Fails with the link's errors (net/error.hpp: the node refused
  // the command, the link was lost or closed), operation_aborted when cancelled, or the sink's or source's.
  virtual boost::asio::awaitable<result<exit_info>> exec(tracing::action& parent, const exec_request& request,
                                                         diagnostics& diag) = 0;

  // Accepts on `listener` (the caller's, bound where it chooses) until cancelled, and carries each accepted
  // connection to `target` as the node sees it, both ways, until both sides closed. Every connection has
  // ended when this returns; the listener is closed on the way out.
  virtual boost::asio::awaitable<void> serve_forwarding(tracing::action& parent,
                                                        boost::asio::ip::tcp::acceptor& listener,
                                                        forward_target target) = 0;

  // Puts `bytes` (or the file `local`) at `remote_path` on the node with `mode`, whole and verified or not
  // at all; parent directories are created.
  virtual boost::asio::awaitable<result<transfer_result>> upload(tracing::action& parent, std::span<const char> bytes,
                                                                 const std::string& remote_path, unsigned mode,
                                                                 diagnostics& diag) = 0;
  virtual boost::asio::awaitable<result<transfer_result>> upload_file(tracing::action& parent,
                                                                      const std::filesystem::path& local,
                                                                      const std::string& remote_path, unsigned mode,
                                                                      diagnostics& diag) = 0;
};

struct command_output {
  exit_info exit;
  std::string out;
  std::string err;
};

// exec with `input` as stdin and both streams collected, together up to `max_output` bytes.
boost::asio::awaitable<result<command_output>> run_command(tracing::action& parent, node_link& link,
                                                           std::string command, diagnostics& diag,
                                                           std::string_view input = {},
                                                           std::size_t max_output = 16 << 20);

}  // namespace ferry::net
