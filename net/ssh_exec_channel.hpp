#pragma once
// One exec channel, the machinery under net/ssh_exec.hpp: open it, start the command, then move bytes
// (stdout and stderr to the sink, stdin from the source) until the command ended, parking on the
// session whenever nothing can move. Output is read only after the sink took the previous chunk, and
// libssh grows the channel's window only as output is read, so each channel buffers at most about one
// window (libssh's ~1.3 MB). Input goes out only while libssh has nothing else queued for the socket
// and as far as the peer's window allows.
//
// What to do next, and what the channel's end means, is net/exec_lifecycle.hpp's to decide: the channel
// tells its core what libssh said and moves bytes as the core says.
#include "net/exec_lifecycle.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_libssh.hpp"
#include "net/ssh_session.hpp"

#include <libssh/callbacks.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::net {

class exec_channel {
 public:
  using clock = ssh_session::clock;

  // command: runs through wrap_in_process_group, its first stdout line is the group id; kill: ferry's own
  // kill of a cancelled command, as is, and on the channel kept free for it.
  using kind = exec_lifecycle::kind;

  exec_channel(std::shared_ptr<ssh_session> session, const exec_request& request, kind k);
  ~exec_channel();
  exec_channel(const exec_channel&) = delete;
  exec_channel& operator=(const exec_channel&) = delete;

  // Opens the channel and starts the command, within ssh.connect_timeout.
  asio::awaitable<error_code> start(diagnostics& diag);
  // Moves bytes until the command ended and passes on what the core held back.
  asio::awaitable<error_code> run(diagnostics& diag);
  // Reads stdout until the group id line came, or `deadline`: passed on after a cancellation, else dropped.
  asio::awaitable<void> await_group(clock::time_point deadline);
  // Reads stdout and stderr until the command ended, or `deadline` (passed on after a cancellation, else
  // dropped): while it is being killed, a command blocked writing to a full channel could not act on its TERM.
  asio::awaitable<void> drain(clock::time_point deadline);

  exec_lifecycle& core() { return core_; }
  std::uint64_t bytes_out() const { return bytes_out_; }
  std::uint64_t bytes_err() const { return bytes_err_; }
  std::uint64_t bytes_in() const { return bytes_in_; }

 private:
  static void on_exit_status(ssh_session_struct*, ssh_channel, int status, void* self);
  static void on_exit_signal(ssh_session_struct*, ssh_channel, const char* signal, int core, const char* errmsg,
                             const char* lang, void* self);
  static void on_close(ssh_session_struct*, ssh_channel, void* self);

  template <class Step>
  asio::awaitable<error_code> until_done(Step step, std::string_view doing, clock::time_point deadline,
                                         diagnostics& diag);
  asio::awaitable<error_code> open(clock::time_point deadline, diagnostics& diag);
  bool refused_for_lack_of_channels() const;
  open_failure why_open_failed(const error_code& ec, clock::time_point deadline) const;
  void free_channel();
  // Reads and drops stdout (and stderr) until `done`, the command's end, or `deadline`.
  asio::awaitable<void> discard_output_until(std::function<bool()> done, bool with_stderr,
                                             clock::time_point deadline);
  asio::awaitable<error_code> pass_output(output_stream which, bool& progressed, diagnostics& diag);
  asio::awaitable<error_code> deliver(output_stream which, std::span<const char> bytes);
  asio::awaitable<error_code> feed_input(bool& progressed, diagnostics& diag);
  bool ended();
  std::string what() const;

  std::shared_ptr<ssh_session> session_;
  ssh_session::busy_scope busy_;  // declared before the channel: the session counts as busy until it is freed
  libssh::channel_ptr channel_;
  ssh_channel_callbacks_struct callbacks_{};
  const exec_request& request_;
  kind kind_;
  exec_lifecycle core_;
  bool holds_slot_ = false;

  std::vector<char> output_buffer_;
  std::vector<char> input_buffer_;  // allocated at the first read of input: most commands have none
  std::size_t last_output_read_ = 0;
  std::size_t last_input_read_ = 0;
  std::span<const char> pending_input_;
  bool input_ended_ = false;
  bool eof_sent_ = false;

  std::uint64_t bytes_out_ = 0;
  std::uint64_t bytes_err_ = 0;
  std::uint64_t bytes_in_ = 0;
};

}  // namespace ferry::net
