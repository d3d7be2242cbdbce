// lease-run's decisions (agent/node/lease_watch.hpp) on a clock of the test's own: nothing is due before
// the expiry, TERM at it, KILL once the grace after the first TERM is over (whether an expiry or a
// forwarded signal sent it), a renewal read before the expiry keeps the command, one read after changes
// nothing, and the wait never passes the next read, the expiry or the KILL.
#include "agent/node/lease_watch.hpp"

#include <gtest/gtest.h>

// A namespace of its own: the test binary is a unity build.
namespace ferry::agent::node::lease_watch_tests {
namespace {

using namespace std::chrono_literals;
using wall = lease_watch::wall_time;
using steady = lease_watch::steady_time;

constexpr std::int64_t expiry = 1'800'000'000;

wall at(std::int64_t seconds, std::chrono::milliseconds plus = 0ms) { return wall(std::chrono::seconds(seconds)) + plus; }

TEST(lease_watch, waits_until_the_expiry_then_terms_then_kills_after_the_grace) {
  lease_watch w(3s);
  w.read(expiry);
  const steady t0{};
  auto step = w.next(at(expiry - 10), t0);
  EXPECT_EQ(step.action, lease_action::wait);
  EXPECT_EQ(step.wait, lease_watch::read_interval) << "the file is read again within a second";
  step = w.next(at(expiry, -250ms), t0);
  EXPECT_EQ(step.action, lease_action::wait);
  EXPECT_EQ(step.wait, 250ms) << "it wakes at the expiry";
  EXPECT_EQ(w.next(at(expiry), t0).action, lease_action::term);
  EXPECT_FALSE(w.expired());
  w.expire(t0);
  EXPECT_TRUE(w.expired());
  step = w.next(at(expiry, 100ms), t0 + 2500ms);
  EXPECT_EQ(step.action, lease_action::wait);
  EXPECT_EQ(step.wait, 500ms) << "it wakes at the end of the grace";
  EXPECT_EQ(w.next(at(expiry, 3s), t0 + 3s).action, lease_action::kill);
  w.killed();
  EXPECT_EQ(w.next(at(expiry, 4s), t0 + 4s).action, lease_action::wait);
}

TEST(lease_watch, a_renewal_read_before_the_expiry_keeps_the_command_and_one_read_after_does_not) {
  lease_watch w(1s);
  w.read(expiry);
  w.read(expiry + 60);
  EXPECT_EQ(w.next(at(expiry, 1ms), steady{}).action, lease_action::wait);
  EXPECT_EQ(w.next(at(expiry + 60), steady{}).action, lease_action::term);
  w.expire(steady{});
  w.read(expiry + 600);
  EXPECT_EQ(w.expires_at(), expiry + 60) << "expired is expired: the slots may be someone else's";
  EXPECT_EQ(w.next(at(expiry + 61), steady{} + 1s).action, lease_action::kill);
}

TEST(lease_watch, a_forwarded_signal_starts_the_grace_and_an_expiry_after_it_does_not_restart_it) {
  lease_watch w(2s);
  w.read(expiry);
  const steady t0{};
  w.signalled(t0);
  EXPECT_FALSE(w.expired());
  EXPECT_EQ(w.next(at(expiry - 5), t0 + 1s).action, lease_action::wait);
  EXPECT_EQ(w.next(at(expiry - 5), t0 + 1s).wait, 1s);
  EXPECT_EQ(w.next(at(expiry), t0 + 1500ms).action, lease_action::term);
  w.expire(t0 + 1500ms);
  EXPECT_TRUE(w.expired());
  EXPECT_EQ(w.next(at(expiry), t0 + 2s).action, lease_action::kill) << "the grace runs from the first TERM";
}

TEST(lease_watch, no_grace_kills_at_once_and_a_past_expiry_terms_at_once) {
  lease_watch w(0s);
  w.read(0);
  EXPECT_EQ(w.next(at(expiry), steady{}).action, lease_action::term);
  w.expire(steady{});
  EXPECT_EQ(w.next(at(expiry), steady{}).action, lease_action::kill);
}

TEST(lease_watch, lease_ids_and_expiries) {
  EXPECT_TRUE(lease_id_valid("a1-B2-c3"));
  EXPECT_FALSE(lease_id_valid(""));
  EXPECT_FALSE(lease_id_valid("a/b"));
  EXPECT_FALSE(lease_id_valid(".."));
  EXPECT_FALSE(lease_id_valid("a_b"));
  EXPECT_FALSE(lease_id_valid(std::string(129, 'a')));
  EXPECT_EQ(parse_expiry("1800000000"), 1800000000);
  EXPECT_EQ(parse_expiry("1800000000\n"), 1800000000);
  EXPECT_EQ(parse_expiry("0"), 0);
  for (const auto* bad : {"", "\n", "-5", "+5", "1e9", "12 ", " 12", "0x10", "1800000000\n\n", "9999999999999999999"})
    EXPECT_FALSE(parse_expiry(bad)) << bad;
}

}  // namespace
}  // namespace ferry::agent::node::lease_watch_tests
