#include "net/ssh_exec_channel.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::net {
namespace {

// Buffers start small and double each time a read fills one, up to the largest useful size: a map holds
// a thousand channels open at once, nearly all of them moving a few bytes.
constexpr std::size_t first_chunk = 2 << 10;
constexpr std::size_t output_chunk = 64 << 10;  // two of libssh's largest packets
constexpr std::size_t input_chunk = 32 << 10;   // one packet

// A buffer that a read just filled doubles for the next read, up to `most`.
void grow_if_filled(std::vector<char>& buffer, std::size_t filled, std::size_t most) {
  if (filled == buffer.size() && buffer.size() < most) buffer.resize(std::min(most, buffer.size() * 2));
}

exec_limits limits_of(const config::ssh_settings& settings) {
  exec_limits limits;
  limits.kill_grace = settings.kill_grace;
  return limits;
}

}  // namespace

exec_channel::exec_channel(std::shared_ptr<ssh_session> session, const exec_request& request, kind k)
    : session_(std::move(session)),
      busy_(*session_),
      request_(request),
      kind_(k),
      core_(k, limits_of(session_->settings()), session_->peer().describe(), request.command),
      output_buffer_(first_chunk) {}

exec_channel::~exec_channel() {
  if (request_.input) request_.input->on_ready({});
  free_channel();
}

void exec_channel::free_channel() {
  if (channel_) {
    // libssh keeps a channel it was told to free until the peer closes its end: it must not call us then.
    ssh_remove_channel_callbacks(channel_.get(), &callbacks_);
    channel_.reset();
    // Freeing queued a close for the peer; the pump has to send it.
    session_->note_io();
  }
  if (holds_slot_) {
    holds_slot_ = false;
    session_->channel_closed();
  }
}

std::string exec_channel::what() const {
  constexpr std::size_t shown = 200;
  const auto& c = request_.command;
  return c.size() <= shown ? "'" + c + "'" : "'" + c.substr(0, shown) + "...'";
}

void exec_channel::on_exit_status(ssh_session_struct*, ssh_channel, int status, void* self) {
  static_cast<exec_channel*>(self)->core_.exit_status(status);
}

void exec_channel::on_exit_signal(ssh_session_struct*, ssh_channel, const char* signal, int core, const char*,
                                  const char*, void* self) {
  static_cast<exec_channel*>(self)->core_.exit_signal(signal ? signal : "", core != 0);
}

void exec_channel::on_close(ssh_session_struct*, ssh_channel, void* self) {
  static_cast<exec_channel*>(self)->core_.peer_closed();
}

// Repeats a libssh call that answers SSH_AGAIN until it is done, parking on the session in between.
template <class Step>
asio::awaitable<error_code> exec_channel::until_done(Step step, std::string_view doing, clock::time_point deadline,
                                                     diagnostics& diag) {
  for (;;) {
    const int rc = session_->call(step);
    if (rc == SSH_OK) co_return error_code{};
    if (rc == SSH_ERROR) co_return session_->libssh_failure(fmt::format("{} for {}", doing, what()), diag);
    const auto ec = co_await session_->wait_for_activity_until(deadline, diag);
    if (ec == make_error_code(errc::timeout)) {
      diag.set(fmt::format("{} for {} on {}: no answer within {} ms (ssh.connect_timeout)", doing, what(),
                           session_->peer().describe(), session_->settings().connect_timeout.count()));
      co_return ec;
    }
    if (ec) co_return ec;
  }
}

// The node said no to a channel (the core decides what that means for the cap).
bool exec_channel::refused_for_lack_of_channels() const {
  return libssh::last_error(session_->native()).rfind("Channel opening failure", 0) == 0;
}

open_failure exec_channel::why_open_failed(const error_code& ec, clock::time_point deadline) const {
  open_failure f;
  f.ec = ec;
  f.session_open = session_->is_open();
  f.for_lack_of_channels = f.session_open && refused_for_lack_of_channels();
  f.others_open = session_->open_channels() - 1;
  f.capped = session_->channel_limit() > 0;
  f.time_left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return f;
}

// Opens a session channel, waiting for a free one when the node caps them.
asio::awaitable<error_code> exec_channel::open(clock::time_point deadline, diagnostics& diag) {
  for (;;) {
    const auto step = core_.next();
    if (step.learn_limit) session_->learn_channel_limit(*step.learn_limit);
    if (step.wait > std::chrono::milliseconds::zero()) {
      const auto waited = co_await session_->wait_for_activity_until(clock::now() + step.wait, diag);
      if (waited && waited != make_error_code(errc::timeout)) co_return waited;
    }
    // A command waits, without a deadline, for a channel the session's count says is free: that is how
    // commands beyond the node's cap queue. A kill waits only until the start's deadline: the count holds
    // the very channel it is to stop, and a cap learned too low would otherwise keep it waiting for ever.
    while (!session_->channel_available(kind_ == kind::kill)) {
      error_code ec;  // not a ternary of two co_awaits: GCC 12 miscompiles co_await in its operands
      if (kind_ == kind::kill)
        ec = co_await session_->wait_for_activity_until(deadline, diag);
      else
        ec = co_await session_->wait_for_activity(diag);
      if (ec == make_error_code(errc::timeout))
        diag.set(fmt::format("no channel came free on {} for {} within ssh.connect_timeout",
                             session_->peer().describe(), what()));
      if (ec) co_return ec;
    }
    channel_.reset(ssh_channel_new(session_->native()));
    if (!channel_) co_return session_->libssh_failure("creating a channel", diag);
    session_->channel_opened();
    holds_slot_ = true;
    ssh_callbacks_init(&callbacks_);
    callbacks_.userdata = this;
    callbacks_.channel_exit_status_function = &exec_channel::on_exit_status;
    callbacks_.channel_exit_signal_function = &exec_channel::on_exit_signal;
    callbacks_.channel_close_function = &exec_channel::on_close;
    ssh_set_channel_callbacks(channel_.get(), &callbacks_);
    ssh_channel ch = channel_.get();
    const auto open_session = [ch] { return ssh_channel_open_session(ch); };
    const auto ec = co_await until_done(open_session, "opening a channel", deadline, diag);
    if (!ec) {
      core_.opened();
      co_return ec;
    }
    core_.open_failed(why_open_failed(ec, deadline));
    if (core_.next().action != exec_action::open) co_return ec;
    // Full: ask again as the core says, once this channel's slot is given back.
    free_channel();
  }
}

asio::awaitable<error_code> exec_channel::start(diagnostics& diag) {
  if (!session_->is_open()) co_return session_->failure(diag);
  // Input that comes while the channel waits for output wakes it (see input_source::ready()).
  if (request_.input)
    request_.input->on_ready([weak = std::weak_ptr<ssh_session>(session_)] {
      if (auto s = weak.lock()) s->wake_waiters();
    });
  const auto deadline = clock::now() + session_->settings().connect_timeout;
  auto ec = co_await open(deadline, diag);
  if (ec) co_return ec;
  ssh_channel ch = channel_.get();
  const std::string line = kind_ == kind::command ? wrap_in_process_group(request_.command) : request_.command;
  const auto run = [ch, &line] { return ssh_channel_request_exec(ch, line.c_str()); };
  // until_done sends the request before it first suspends.
  core_.requesting();
  ec = co_await until_done(run, "starting the command", deadline, diag);
  if (!ec) core_.started();
  co_return ec;
}

asio::awaitable<error_code> exec_channel::run(diagnostics& diag) {
  for (;;) {
    bool progressed = false;
    auto ec = co_await pass_output(output_stream::out, progressed, diag);
    if (!ec) ec = co_await pass_output(output_stream::err, progressed, diag);
    if (!ec) ec = co_await feed_input(progressed, diag);
    if (ec) co_return ec;
    if (ended()) break;
    if (progressed) continue;
    ec = co_await session_->wait_for_activity(diag);
    if (ec) co_return ec;
  }
  // No group id line came: the wrapper never ran, and what the core held back is the command's.
  const auto rest = core_.end_of_stdout();
  co_return co_await deliver(output_stream::out, rest);
}

asio::awaitable<void> exec_channel::await_group(clock::time_point deadline) {
  co_await discard_output_until([this] { return core_.group().has_value(); }, false, deadline);
}

asio::awaitable<void> exec_channel::drain(clock::time_point deadline) {
  co_await discard_output_until([] { return false; }, true, deadline);
}

asio::awaitable<void> exec_channel::discard_output_until(std::function<bool()> done, bool with_stderr,
                                                         clock::time_point deadline) {
  diagnostics ignored;
  while (!done() && !ended()) {
    bool progressed = false;
    if (co_await pass_output(output_stream::out, progressed, ignored)) co_return;
    if (with_stderr) {  // not `a && co_await b`: GCC 12 miscompiles co_await in a short-circuit operand
      if (co_await pass_output(output_stream::err, progressed, ignored)) co_return;
    }
    if (progressed) continue;
    if (co_await session_->wait_for_activity_until(deadline, ignored)) co_return;
  }
}

bool exec_channel::ended() {
  if (ssh_channel_is_eof(channel_.get()) != 0) core_.output_eof();
  return core_.ended();
}

asio::awaitable<error_code> exec_channel::pass_output(output_stream which, bool& progressed, diagnostics& diag) {
  ssh_channel ch = channel_.get();
  const int is_stderr = which == output_stream::err;
  // Grown here, not after the last read: what that read delivered pointed into the buffer.
  grow_if_filled(output_buffer_, last_output_read_, output_chunk);
  const auto read = [&] {
    return ssh_channel_read_nonblocking(ch, output_buffer_.data(), static_cast<uint32_t>(output_buffer_.size()),
                                        is_stderr);
  };
  const int n = session_->call(read);
  if (n == SSH_ERROR) co_return session_->libssh_failure(fmt::format("reading the output of {}", what()), diag);
  if (n <= 0) co_return error_code{};  // nothing now, or SSH_EOF
  last_output_read_ = static_cast<std::size_t>(n);
  progressed = true;
  std::span<const char> bytes(output_buffer_.data(), static_cast<std::size_t>(n));
  // The core takes the group id line (and what came before it) out of stdout.
  if (which == output_stream::out) bytes = core_.take_stdout(bytes);
  co_return co_await deliver(which, bytes);
}

asio::awaitable<error_code> exec_channel::deliver(output_stream which, std::span<const char> bytes) {
  (which == output_stream::out ? bytes_out_ : bytes_err_) += bytes.size();
  // While a failed command is stopped its output is read only to keep it moving, and dropped (see passes_output).
  if (!core_.passes_output() || !request_.output || bytes.empty()) co_return error_code{};
  co_return co_await request_.output->write(which, bytes);
}

asio::awaitable<error_code> exec_channel::feed_input(bool& progressed, diagnostics& diag) {
  if (eof_sent_) co_return error_code{};
  // A command that ended reads no more: the rest of its input is moot.
  if (core_.exited()) {
    eof_sent_ = true;
    co_return error_code{};
  }
  if (pending_input_.empty() && !input_ended_) {
    if (!request_.input) {
      input_ended_ = true;
    } else if (!request_.input->ready()) {
      // Nothing to send now: output goes on moving, and the source wakes this loop when it has some.
    } else {
      if (input_buffer_.empty()) input_buffer_.resize(first_chunk);
      grow_if_filled(input_buffer_, last_input_read_, input_chunk);
      auto n = co_await request_.input->read(input_buffer_);
      if (!n) {
        diag.set(fmt::format("reading the input for {} on {}: {}", what(), session_->peer().describe(),
                             n.error().message()));
        co_return n.error();
      }
      input_ended_ = *n == 0;
      last_input_read_ = *n;
      pending_input_ = std::span<const char>(input_buffer_.data(), *n);
      progressed = true;
      // The read may have waited (for input that comes as other work finishes): a command that ended
      // meanwhile reads no more either, and its channel takes no more.
      if (core_.exited()) {
        pending_input_ = {};
        eof_sent_ = true;
        co_return error_code{};
      }
    }
  }
  ssh_channel ch = channel_.get();
  // What libssh queued for the socket goes first; the window is how much the peer takes now.
  if (!pending_input_.empty() && !session_->output_backlog()) {
    const auto size = std::min<std::size_t>(pending_input_.size(), ssh_channel_window_size(ch));
    if (size > 0) {
      const auto write = [&] { return ssh_channel_write(ch, pending_input_.data(), static_cast<uint32_t>(size)); };
      const int sent = session_->call(write);
      if (sent == SSH_ERROR)
        co_return session_->libssh_failure(fmt::format("writing the input of {}", what()), diag);
      pending_input_ = pending_input_.subspan(static_cast<std::size_t>(sent));
      bytes_in_ += static_cast<std::size_t>(sent);
      progressed = progressed || sent > 0;
    }
  }
  if (pending_input_.empty() && input_ended_) {
    const auto eof = [ch] { return ssh_channel_send_eof(ch); };
    if (session_->call(eof) == SSH_ERROR)
      co_return session_->libssh_failure(fmt::format("closing the input of {}", what()), diag);
    eof_sent_ = true;
    progressed = true;
  }
  co_return error_code{};
}

}  // namespace ferry::net
