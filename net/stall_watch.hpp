#pragma once
// A watch on storage that stops answering: one per S3 session, told of every request's traffic by the
// connections (net/http_connection) and around every call by the client (net/s3_client). Its clock runs
// only while a call does; a byte from storage resets it (a request answered, a body arriving), and so do
// request bytes going out (a large upload on a slow link is progress, not a stall).
//
// Written bytes prove less than read ones: the kernel's buffers take the first megabytes of a request to a
// server that stopped reading. So once a request has ended without a byte of answer, what ferry sends is
// no longer taken as progress until storage answers something again. Without that rule each retry of a
// request to frozen storage would start the clock afresh, and the limit would never be reached.
//
// The last megabytes of an upload leave the kernel's buffers after the last write returned, with nothing
// more to hear until the answer. Before it warns or gives up, the watch asks each request's socket how
// much is still unsent (SIOCOUTQ): less than after the last write means the bytes are still moving.
//
// Quiet for net.stall_warning: one line names the endpoint, the operation and the object, again each time
// the quiet doubles, and the trace gets a message. Quiet for net.stall_limit: every call of the session
// ends with errc::stalled and one message naming the same, and every later call fails so at once. A call
// in its retry backoff is a call too, so retries never go on past the limit.
#include "net/cancellation.hpp"
#include "net/deadline.hpp"
#include "net/error.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <string>

namespace ferry::net {

// What a call is, as the warning and the error name it: never a query string (a presigned URL's
// signature, an upload id).
struct stall_subject {
  std::string endpoint;   // scheme://host:port
  std::string operation;  // "UploadPart"
  std::string object;     // s3://bucket/key
};

struct stall_settings {
  std::chrono::milliseconds warning{10'000};  // 0: no warning
  std::chrono::milliseconds limit{120'000};   // 0: no limit
};

class stall_watch {
 public:
  using clock = std::chrono::steady_clock;
  // Shows one warning line to the person running ferry (the terminal).
  using notice = std::function<void(const std::string& line)>;

  stall_watch(stall_settings settings, notice on_warning);
  stall_watch(const stall_watch&) = delete;
  stall_watch& operator=(const stall_watch&) = delete;

  // One request on the wire of socket `fd`, from its first byte out to its end. `watch` may be null.
  class exchange {
   public:
    exchange(stall_watch* watch, int fd);
    ~exchange();
    exchange(const exchange&) = delete;
    exchange& operator=(const exchange&) = delete;
    void sent();      // request bytes went out
    void received();  // response bytes came in
    // Whether the socket's unsent bytes went down since the last write or the last look.
    bool draining();

   private:
    long unsent() const;

    stall_watch* watch_;
    int fd_;
    std::list<exchange*>::iterator at_;
    long unsent_ = -1;
    bool answered_ = false;
  };

  // Runs `op`, a call to storage with all its attempts, under the watch: its result, or errc::stalled
  // with the watch's message in `diag` once the session made no progress for the limit. `act` gets the
  // warning and stall messages.
  template <class T>
  boost::asio::awaitable<result<T>> guard(tracing::action& act, stall_subject what, boost::asio::awaitable<result<T>> op,
                                          diagnostics& diag);

  // The limit passed: every call fails with stalled().
  bool stalled() const { return stalled_; }
  const diagnostics& stall_diagnostics() const { return stall_diag_; }
  const stall_settings& settings() const { return settings_; }

 private:
  struct call {
    stall_subject what;
    boost::asio::steady_timer* timer = nullptr;  // its watcher's, while that runs
  };
  using call_ref = std::list<call>::iterator;

  // A call began or ended: time with no call running is never a stall.
  call_ref enter(stall_subject what);
  void leave(call_ref c);
  void progress() { progress_ = clock::now(); }
  // Each call's watcher sleeps until the next warning or the limit; the first to wake past the limit
  // trips the watch and wakes the others.
  boost::asio::awaitable<void> watch(tracing::action& act, call_ref me);
  // Before a warning or the end: progress that no write or read reported, bytes leaving the buffers.
  void look_at_sockets();
  void warn(tracing::action& act, clock::duration quiet);
  void trip(tracing::action& act, clock::duration quiet);

  stall_settings settings_;
  notice notice_;
  std::list<call> calls_;  // the oldest first: the warning names it
  std::list<exchange*> exchanges_;
  clock::time_point progress_;
  clock::time_point idle_since_;
  bool trust_sends_ = true;
  clock::time_point episode_;                // the progress the warnings so far were counted from
  clock::duration next_warning_{};           // the quiet at which the next warning shows
  bool stalled_ = false;
  diagnostics stall_diag_;
};

// Inline: the node program's HTTP connections (agent/node) have no watch, and no stall_watch.cpp.
inline stall_watch::exchange::exchange(stall_watch* watch, int fd) : watch_(watch), fd_(fd) {
  if (watch_) at_ = watch_->exchanges_.insert(watch_->exchanges_.end(), this);
}

inline stall_watch::exchange::~exchange() {
  if (!watch_) return;
  watch_->exchanges_.erase(at_);
  // Ended without a byte of answer: what went out may only have filled buffers.
  if (!answered_) watch_->trust_sends_ = false;
}

inline long stall_watch::exchange::unsent() const {
  int n = 0;
  if (fd_ < 0 || ::ioctl(fd_, SIOCOUTQ, &n) != 0) return -1;
  return n;
}

inline void stall_watch::exchange::sent() {
  if (!watch_) return;
  unsent_ = unsent();
  if (watch_->trust_sends_) watch_->progress();
}

inline bool stall_watch::exchange::draining() {
  const auto now = unsent();
  const bool less = unsent_ >= 0 && now >= 0 && now < unsent_;
  unsent_ = now;
  return less;
}

inline void stall_watch::exchange::received() {
  if (!watch_) return;
  answered_ = true;
  watch_->trust_sends_ = true;
  watch_->progress();
}

template <class T>
boost::asio::awaitable<result<T>> stall_watch::guard(tracing::action& act, stall_subject what,
                                                     boost::asio::awaitable<result<T>> op, diagnostics& diag) {
  using namespace boost::asio::experimental::awaitable_operators;
  if (stalled_) {
    diag = stall_diag_;
    co_return make_error_code(errc::stalled);
  }
  const auto me = enter(std::move(what));
  struct leaving {
    stall_watch& w;
    call_ref c;
    ~leaving() { w.leave(c); }
  } left{*this, me};
  auto first = co_await (deadline_detail::accepting(std::move(op)) || watch(act, me));
  if (first.index() == 0) {
    auto r = std::get<0>(std::move(first));
    if (r || !stalled_) co_return r;
  } else if (!stalled_) {
    co_return make_error_code(boost::asio::error::operation_aborted);  // the caller stops
  }
  // The first failure of a call cut short by the stall says less than the stall does.
  diag = stall_diag_;
  co_return make_error_code(errc::stalled);
}

}  // namespace ferry::net
