#pragma once
// ssh.max_sessions as a pool: at most that many SSH sessions are open at once in one ferry process. A
// session takes a slot before it connects and gives it back when it goes; one that finds the pool full
// waits its turn, first come first served. A job of more nodes than slots runs on as many as there are
// slots, and the rest start as sessions end.
//
// The pool and its waiters live on the I/O thread.
#include "net/notifier.hpp"
#include "tracing/diagnostics.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <list>
#include <memory>

namespace ferry::net {

class session_slots : public std::enable_shared_from_this<session_slots> {
 public:
  explicit session_slots(std::size_t limit);

  // A slot held: given back when the permit goes.
  class permit {
   public:
    permit() = default;
    explicit permit(std::shared_ptr<session_slots> owner) : owner_(std::move(owner)) {}
    permit(permit&& other) noexcept = default;
    permit& operator=(permit&& other) noexcept;
    permit(const permit&) = delete;
    permit& operator=(const permit&) = delete;
    ~permit() { reset(); }
    void reset();
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    std::shared_ptr<session_slots> owner_;
  };

  // A slot, at once when one is free, else when it is this caller's turn; operation_aborted when the
  // caller is cancelled first.
  boost::asio::awaitable<result<permit>> acquire();

  std::size_t limit() const { return limit_; }
  std::size_t in_use() const { return used_; }
  std::size_t waiting() const { return waiting_.size(); }

 private:
  struct waiter {
    notifier wake;  // notified when the slot is handed over
    bool granted = false;
  };
  void give_back();

  std::size_t limit_;
  std::size_t used_ = 0;
  std::list<waiter*> waiting_;
};

}  // namespace ferry::net
