#pragma once
// How ferry's coroutines see cancellation. Asio's default is to accept only terminal cancellation and
// to throw from the next co_await once cancelled; ferry treats cancellation as an expected failure
// instead: every coroutine thread accepts total cancellation (Ctrl-C's first step) and gets
// operation_aborted as an error code from the operation it was waiting on. Work that runs between
// operations (a hash on the CPU pool) is not interrupted, so loops ask cancelled() before each new step.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include <type_traits>

namespace ferry::net {

// Channels report a cancelled wait as channel_cancelled; ferry speaks of it as operation_aborted.
inline boost::system::error_code as_cancellation(boost::system::error_code ec) {
  if (ec == boost::asio::experimental::channel_errc::channel_cancelled) return boost::asio::error::operation_aborted;
  return ec;
}

// How far a cancellation goes, in the words of the sans-io cores (which hold no Asio state): partial and
// total stop an operation, total being Ctrl-C's first step; terminal also stops its clean-up (the grace
// after Ctrl-C is over).
enum class cancel_kind { partial, total, terminal };

inline bool is_terminal(boost::asio::cancellation_type_t type) {
  return (type & boost::asio::cancellation_type::terminal) != boost::asio::cancellation_type::none;
}

// The strongest kind in `type`; total when none is there (an operation that reports a cancellation its
// own coroutine did not hear, such as a sink that was cancelled itself).
inline cancel_kind kind_of(boost::asio::cancellation_type_t type) {
  if (is_terminal(type)) return cancel_kind::terminal;
  if ((type & boost::asio::cancellation_type::partial) != boost::asio::cancellation_type::none)
    return cancel_kind::partial;
  return cancel_kind::total;
}

// Call first in every coroutine started with co_spawn.
inline boost::asio::awaitable<void> accept_cancellation() {
  co_await boost::asio::this_coro::reset_cancellation_state(boost::asio::enable_total_cancellation());
  co_await boost::asio::this_coro::throw_if_cancelled(false);
}

// Awaits `op` without handing it this coroutine's cancellation: for a request whose effect must be learned
// even when the caller stops, such as the id of a multipart upload storage has just created (without it
// the upload could never be aborted). The request's own deadlines still bound the wait; afterwards the
// caller asks cancelled() as usual, because the cancellation was recorded all the same.
template <typename T>
boost::asio::awaitable<T> shielded(boost::asio::awaitable<T> op) {
  auto ex = co_await boost::asio::this_coro::executor;
  co_return co_await boost::asio::co_spawn(
      ex, std::move(op),
      boost::asio::bind_cancellation_slot(boost::asio::cancellation_slot(), boost::asio::use_awaitable));
}

// Beast's composed operations, Asio's SSL stream and asio::async_write accept only terminal (or partial)
// cancellation, so Ctrl-C's first step, which is total, does not reach them: they would run on to their
// deadline. For an I/O object that is closed rather than reused after a cancelled operation (an HTTP
// connection), a relay hands each operation bound through it any cancellation of the calling coroutine as
// terminal. attach() takes the caller's slot (`(co_await this_coro::cancellation_state).slot()`); bind()
// wraps one operation's token, at the moment it starts (another operation of the caller in between, a sink
// or a timer, replaces the relay's handler on the slot with its own); detach() before the caller goes on.
class terminal_relay {
 public:
  terminal_relay() = default;
  explicit terminal_relay(boost::asio::cancellation_slot caller) { attach(caller); }
  ~terminal_relay() { detach(); }
  terminal_relay(const terminal_relay&) = delete;
  terminal_relay& operator=(const terminal_relay&) = delete;

  void attach(boost::asio::cancellation_slot caller) { caller_ = caller; }
  void detach() {
    if (caller_.is_connected()) caller_.clear();
    caller_ = {};
  }

  template <typename Token>
  auto bind(Token token) {
    using boost::asio::cancellation_type;
    if (caller_.is_connected()) caller_.assign([this](cancellation_type) { signal_.emit(cancellation_type::terminal); });
    return boost::asio::bind_cancellation_slot(signal_.slot(), std::move(token));
  }

 private:
  boost::asio::cancellation_slot caller_;
  boost::asio::cancellation_signal signal_;
};

// Whether this coroutine thread has been asked to stop.
inline boost::asio::awaitable<bool> cancelled() {
  auto state = co_await boost::asio::this_coro::cancellation_state;
  co_return state.cancelled() != boost::asio::cancellation_type::none;
}

namespace cancellation_detail {

// `signal` lives in started_cancelled's frame, which outlives this coroutine and the post below (the
// spawned thread ends, and started_cancelled resumes, only through handlers queued after it). Raw
// pointers in the lambdas: GCC 12 destroys some temporaries of a coroutine twice, a shared_ptr among them.
template <typename T>
boost::asio::awaitable<T> cancelled_from_the_start(boost::asio::awaitable<T> op,
                                                   boost::asio::cancellation_signal* signal) {
  co_await accept_cancellation();
  // Recorded now, before `op`'s first step, so that its cancelled() is true from the start; and emitted
  // again once `op` waits, so that its first operation ends at once (any later one is `op`'s own to avoid).
  signal->emit(boost::asio::cancellation_type::total);
  boost::asio::post(co_await boost::asio::this_coro::executor,
                    [signal] { signal->emit(boost::asio::cancellation_type::total); });
  co_return co_await std::move(op);
}

}  // namespace cancellation_detail

// Awaits `op` on a coroutine thread of its own that counts as cancelled (total) from its first step; later
// cancellations of the caller (terminal) reach it too. Asio records a cancellation in a coroutine's state
// but hands it only to the operation in flight at that moment: work that a cancelled coroutine starts
// afterwards on a thread of its own (run_all's tasks) would otherwise run on as if nothing had happened.
template <typename T>
boost::asio::awaitable<T> started_cancelled(boost::asio::awaitable<T> op) {
  namespace asio = boost::asio;
  asio::cancellation_signal signal;
  auto state = co_await boost::asio::this_coro::cancellation_state;
  auto caller = state.slot();
  struct forward {
    explicit forward(asio::cancellation_slot s) : slot(s) {}
    ~forward() {
      if (slot.is_connected()) slot.clear();
    }
    asio::cancellation_slot slot;
  } forwarding(caller);
  auto* to = &signal;
  if (caller.is_connected()) caller.assign([to](asio::cancellation_type t) { to->emit(t); });
  auto ex = co_await asio::this_coro::executor;
  auto task = cancellation_detail::cancelled_from_the_start(std::move(op), to);
  auto token = asio::bind_cancellation_slot(signal.slot(), asio::use_awaitable);
  if constexpr (std::is_void_v<T>) {
    co_await asio::co_spawn(ex, std::move(task), token);
  } else {
    co_return co_await asio::co_spawn(ex, std::move(task), token);
  }
}

// `op` as it is, or started_cancelled(op) when this coroutine was cancelled before it: for an operation
// that runs on threads of its own (Asio's `a || b`).
template <typename T>
boost::asio::awaitable<T> carrying_cancellation(boost::asio::awaitable<T> op) {
  const bool stopped = co_await cancelled();
  if constexpr (std::is_void_v<T>) {
    if (stopped) co_return co_await started_cancelled(std::move(op));
    co_await std::move(op);
  } else {
    if (stopped) co_return co_await started_cancelled(std::move(op));
    co_return co_await std::move(op);
  }
}

namespace cancellation_detail {
inline boost::asio::awaitable<void> accepting(boost::asio::awaitable<void> work) {
  // A spawned coroutine hears only terminal cancellation unless it accepts more.
  co_await accept_cancellation();
  co_await std::move(work);
}
}  // namespace cancellation_detail

// Awaits `work` on a coroutine thread of its own that `stop.emit(type)` cancels from outside, without
// cancelling the caller: one part of a larger whole that may be ended on its own (the layers a node is
// still fetching when its command is over; a node's steps once the job's work is done). The caller's own
// cancellation reaches `work` too. `stop` must outlive the call.
inline boost::asio::awaitable<void> stoppable(boost::asio::awaitable<void> work,
                                              boost::asio::cancellation_signal& stop) {
  namespace asio = boost::asio;
  auto io = co_await asio::this_coro::executor;
  const auto state = co_await asio::this_coro::cancellation_state;
  struct forward {
    asio::cancellation_slot outer;
    ~forward() {
      if (outer.is_connected()) outer.clear();
    }
  } f{state.slot()};
  if (f.outer.is_connected()) f.outer.assign([&stop](asio::cancellation_type t) { stop.emit(t); });
  co_await asio::co_spawn(io, cancellation_detail::accepting(std::move(work)),
                          asio::bind_cancellation_slot(stop.slot(), asio::use_awaitable));
}

}  // namespace ferry::net
