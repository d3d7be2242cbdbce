#pragma once
// When `ferry-node lease-run` ends the command it runs under a pool lease (lease_run.hpp), sans-io. The
// shell reads the lease file, waits for signals and the child, and tells the watch what it saw; next() says
// what to do now: wait (at most read_interval, then read the file again), TERM the command's process group,
// or KILL it.
//
//   running ──the wall clock reaches the lease's expiry──> TERM (expired) ──grace──> KILL
//      └─────a signal forwarded to the group (TERM, INT, HUP)──────────────> ──grace──> KILL
//
// The expiry is the last value read from the file (lease-set never moves it earlier; a value read later
// replaces it, so a renewal that lands before the expiry keeps the command). Once expired, a renewal read
// later changes nothing: the slots may be someone else's already. The grace runs on the steady clock from
// the first TERM, whichever sent it.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry::agent::node {

enum class lease_action {
  wait,  // nothing due: look again after `wait`
  term,  // the lease has expired: TERM to the group, then expire()
  kill,  // the grace after the first TERM is over: KILL to the group, then killed()
};

struct lease_step {
  lease_action action = lease_action::wait;
  std::chrono::milliseconds wait{0};
};

class lease_watch {
 public:
  using wall_time = std::chrono::system_clock::time_point;
  using steady_time = std::chrono::steady_clock::time_point;
  // How often the lease file is read at least (a renewal lands within this).
  static constexpr std::chrono::milliseconds read_interval{1000};

  explicit lease_watch(std::chrono::milliseconds grace) : grace_(grace) {}

  // The lease file's value: seconds since the epoch.
  void read(std::int64_t expires_at);
  // A signal was passed on to the group at `now`.
  void signalled(steady_time now);
  // The expiry's TERM went out at `now`.
  void expire(steady_time now);
  // The KILL went out.
  void killed() { killed_ = true; }

  lease_step next(wall_time wall, steady_time now) const;

  bool expired() const { return expired_; }
  std::optional<std::int64_t> expires_at() const { return expires_at_; }

 private:
  void start_grace(steady_time now);

  std::chrono::milliseconds grace_;
  std::optional<std::int64_t> expires_at_;
  std::optional<steady_time> kill_at_;
  bool expired_ = false;
  bool killed_ = false;
};

// A lease's id as it names its file (<cache>/leases/<id>): letters, digits and '-', 1 to 128 of them.
bool lease_id_valid(std::string_view id);
// A lease file's value or lease-set's argument: decimal digits (a trailing newline allowed in a file's
// text), within int64. Nothing otherwise.
std::optional<std::int64_t> parse_expiry(std::string_view text);

// The exit status of lease-run for a command ended because its lease expired (like timeout(1)'s 124;
// its stderr line tells it from a command's own 124).
inline constexpr int lease_expired_exit = 124;

}  // namespace ferry::agent::node
