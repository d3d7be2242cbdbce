// The multipart upload protocol without I/O: a simulated shell runs the operations the core asks for,
// ends one per step, and checks every action against the protocol's rules. The sans-io harness
// (tests/support/sans_io_harness.hpp) injects faults at every step of every schedule, twice over: a first
// fault (an error, or a partial, total or terminal cancellation) at step k, then optionally a second one at
// every later step j, which is how the steps of the abort itself get their faults.
#include "net/multipart_upload_core.hpp"

#include "support/sans_io_harness.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ferry::net {
namespace {

using kind = multipart_action::kind;
using test::sans_io::error_at;
using test::sans_io::fault_plan;

// How the simulated shell picks which running operation ends next.
struct schedule {
  int parts = 0;              // the source's parts
  int limit = 1;              // parts_in_flight
  bool reads_first = true;    // a running read ends before any send
  bool newest_first = false;  // of the running sends, the newest ends first
};

std::string describe(const schedule& s, bool later_fail) {
  return fmt::format("parts={} limit={} reads_first={} newest_first={} later_fail={}", s.parts, s.limit,
                     s.reads_first, s.newest_first, later_fail);
}

std::uint64_t size_of(int part) { return 100 + static_cast<std::uint64_t>(part); }
std::string etag_of(int part) { return fmt::format("\"etag-{}\"", part); }

// Plays the shell for the harness: the operations the core started, which it ends one per step; every
// action checked.
class simulation {
 public:
  using core_type = multipart_upload_core;
  static constexpr bool ends_on_error = true;

  // later_fail: after the first fault, operations that end fail (each with an error of its own).
  explicit simulation(const schedule& s, bool later_fail = false) : s_(s), later_fail_(later_fail), core_(s.limit) {}

  multipart_upload_core& core() { return core_; }
  const multipart_upload_core& core() const { return core_; }
  static bool is_finish(const multipart_action& a) { return a.what == kind::finish; }
  void started(const multipart_action& a) { check(a); }
  error_code error_at(int step) const { return test::sans_io::error_at(step); }
  bool settled() const { return outcome_known_; }
  // A complete that succeeds is the outcome whatever cancellation came while it ran: the object exists.
  bool success_wins() const { return completing_; }
  error_code outcome_error() const { return core_.failure(); }
  // Every upload created and not completed is aborted, unless a terminal cancellation cut the clean-up.
  bool cleanup_owed() const { return created_ && !completed_ && !terminal_; }
  bool cleaned_up() const { return aborts_ > 0; }

  const std::vector<std::string>& problems() const { return problems_; }
  int most_sending() const { return most_sending_; }
  int aborts() const { return aborts_; }

  void cancel(cancel_kind k) {
    // Once the outcome is known the shell no longer listens; before that, a cancellation is a failure.
    if (!outcome_known_) {
      note_failure(boost::asio::error::operation_aborted, "");
      if (k == cancel_kind::terminal) terminal_ = true;
    }
    core_.cancelled(k);
  }

  // Ends the operation the schedule picks, well or (when told to, or after a fault with later_fail) badly.
  bool advance(int step, bool inject_error) { return end_one(step, inject_error); }

 private:
  void problem(std::string what) { problems_.push_back(std::move(what)); }

  void note_failure(const error_code& ec, const std::string& diag) {
    if (!first_error_) {
      first_error_ = ec;
      first_diag_ = diag;
    }
  }

  bool parts_work_running() const { return reading_.has_value() || !sending_.empty(); }

  bool end_one(int step, bool inject_error) {
    const bool bad = inject_error || (later_fail_ && first_error_.has_value());
    const auto ec = error_at(step);
    const auto diag = fmt::format("step {}", step);
    if (bad) note_failure(ec, diag);
    if (creating_) {
      creating_ = false;
      if (bad) {
        create_failed_ = true;
        outcome_known_ = true;
        core_.create_failed(ec, {diag});
      } else {
        created_ = true;
        core_.created("upload-1");
      }
      return true;
    }
    if (completing_) {
      completing_ = false;
      if (bad) {
        core_.complete_failed(ec, {diag});
      } else {
        completed_ = true;
        outcome_known_ = true;
        core_.completed("\"object\"");
      }
      return true;
    }
    if (aborting_) {
      aborting_ = false;
      outcome_known_ = true;
      if (bad) core_.abort_failed(ec, {diag});
      else core_.aborted();
      return true;
    }
    if (reading_ && (s_.reads_first || sending_.empty())) {
      end_read(bad, ec, diag);
      return true;
    }
    if (sending_.empty()) return false;
    const auto it = s_.newest_first ? std::prev(sending_.end()) : sending_.begin();
    const int n = *it;
    sending_.erase(it);
    held_.erase(n);
    if (bad) core_.part_failed(n, ec, {diag});
    else core_.part_sent(n, etag_of(n));
    return true;
  }

  void end_read(bool bad, const error_code& ec, const std::string& diag) {
    const int n = *reading_;
    reading_.reset();
    if (bad) {
      core_.source_failed(ec, {diag});
    } else if (n > s_.parts) {
      core_.source_ended();
    } else {
      held_.insert(n);
      core_.part_read(n, size_of(n));
    }
  }

  void check(const multipart_action& a) {
    if (finished_) problem("an action after finish");
    switch (a.what) {
      case kind::create: return check_create(a);
      case kind::read_part: return check_read(a);
      case kind::send_part: return check_send(a);
      case kind::release_part: return check_release(a);
      case kind::complete: return check_complete(a);
      case kind::abort: return check_abort(a);
      case kind::finish: return check_finish();
    }
  }

  void check_create(const multipart_action& a) {
    if (creates_++ > 0) problem("a second create");
    if (first_error_) problem("create after a cancellation");
    if (a.stops != cancelled_by::nothing) problem("the create hears cancellation");
    creating_ = true;
  }

  void check_read(const multipart_action& a) {
    if (first_error_) problem(fmt::format("read of part {} after a failure", a.part));
    if (!created_ || completing_ || aborting_) problem("read outside the upload");
    if (reading_) problem("two reads at once");
    if (a.part != last_read_ + 1) problem(fmt::format("read of part {} after part {}", a.part, last_read_));
    // Read ahead by one: every part already read is being sent.
    if (held_.size() != sending_.size()) problem("a read while a part waits for a slot");
    if (a.stops != cancelled_by::any) problem("a read that does not hear cancellation");
    last_read_ = a.part;
    reading_ = a.part;
  }

  void check_send(const multipart_action& a) {
    if (first_error_) problem(fmt::format("send of part {} after a failure", a.part));
    if (!held_.contains(a.part) || sending_.contains(a.part)) problem(fmt::format("send of part {} not held", a.part));
    if (a.stops != cancelled_by::any) problem("a send that does not hear cancellation");
    sending_.insert(a.part);
    most_sending_ = std::max(most_sending_, static_cast<int>(sending_.size()));
    if (static_cast<int>(sending_.size()) > s_.limit) problem(fmt::format("{} parts in flight", sending_.size()));
  }

  void check_release(const multipart_action& a) {
    if (!held_.contains(a.part) || sending_.contains(a.part))
      problem(fmt::format("release of part {} not held or being sent", a.part));
    held_.erase(a.part);
  }

  void check_complete(const multipart_action& a) {
    if (completes_++ > 0) problem("a second complete");
    if (first_error_) problem("complete after a failure");
    if (parts_work_running()) problem("complete while parts run");
    if (static_cast<int>(a.parts.size()) != s_.parts) problem("complete without every part");
    for (std::size_t i = 0; i < a.parts.size(); ++i) {
      const int n = static_cast<int>(i) + 1;
      if (a.parts[i].part_number != n || a.parts[i].etag != etag_of(n)) problem("complete's parts not in order");
    }
    if (a.stops != cancelled_by::any) problem("a complete that does not hear cancellation");
    completing_ = true;
  }

  void check_abort(const multipart_action& a) {
    if (aborts_++ > 0) problem("a second abort");
    if (!created_) problem("abort of an upload never created");
    if (completed_) problem("abort after complete");
    if (terminal_) problem("abort after terminal cancellation");
    if (parts_work_running() || completing_) problem("abort while operations run");
    if (a.stops != cancelled_by::terminal) problem("an abort that hears more than terminal cancellation");
    aborting_ = true;
  }

  void check_finish() {
    finished_ = true;
    if (creating_ || completing_ || aborting_ || parts_work_running()) problem("finish while operations run");
    if (!held_.empty()) problem(fmt::format("finish with {} parts neither sent nor released", held_.size()));
    if (!core_.done()) problem("finish handed out, but the core says it is not finished");
    if (!core_.next().empty()) problem("actions after finish");
    check_outcome();
  }

  void check_outcome() {
    if (completed_) {
      if (core_.failure()) problem(fmt::format("completed, but failed with {}", core_.failure().message()));
      if (core_.bytes() != expected_bytes()) problem("wrong byte count");
      if (core_.parts() != s_.parts) problem("wrong part count");
      if (core_.etag() != "\"object\"") problem("wrong etag");
      return;
    }
    if (!first_error_) return problem("failed without a fault");
    if (core_.failure() != *first_error_)
      problem(fmt::format("failed with {} instead of the first failure {}", core_.failure().value(),
                          first_error_->value()));
    if (core_.failure_diagnostics().message != first_diag_) problem("the diagnostics are not the first failure's");
    // Every upload created and not completed is aborted, unless a terminal cancellation cut the clean-up.
    if (created_ && aborts_ == 0 && !terminal_) problem("a created upload left without an abort");
    if (create_failed_ && aborts_ > 0) problem("abort after create failed");
  }

  std::uint64_t expected_bytes() const {
    std::uint64_t total = 0;
    for (int n = 1; n <= s_.parts; ++n) total += size_of(n);
    return total;
  }

  schedule s_;
  bool later_fail_ = false;
  multipart_upload_core core_;
  std::vector<std::string> problems_;
  int creates_ = 0, completes_ = 0, aborts_ = 0;
  bool creating_ = false, created_ = false, create_failed_ = false;
  bool completing_ = false, completed_ = false, aborting_ = false;
  bool finished_ = false, terminal_ = false, outcome_known_ = false;
  std::optional<int> reading_;
  int last_read_ = 0;
  std::set<int> held_;     // read, neither sent nor released
  std::set<int> sending_;  // being sent
  int most_sending_ = 0;
  std::optional<error_code> first_error_;
  std::string first_diag_;
};


std::vector<schedule> schedules() {
  std::vector<schedule> out;
  for (int parts : {0, 1, 2, 5})
    for (int limit : {1, 2, 3})
      for (bool reads_first : {true, false})
        for (bool newest_first : {false, true}) out.push_back({parts, limit, reads_first, newest_first});
  return out;
}

TEST(multipart_upload_core, cancellation_is_asio_operation_aborted) {
  EXPECT_EQ(multipart_upload_core::cancellation_error(), boost::asio::error::operation_aborted);
  EXPECT_EQ(multipart_upload_core::cancellation_error(), make_error_code(boost::asio::error::operation_aborted));
}

TEST(multipart_upload_core, every_schedule_completes_in_order_within_the_bound) {
  for (const auto& s : schedules()) {
    simulation sim(s);
    test::sans_io::run<simulation> run(sim, fault_plan{});
    run.play();
    const auto what = describe(s, false);
    EXPECT_EQ(run.problems(), std::vector<std::string>{}) << what;
    EXPECT_FALSE(sim.core().failure()) << what;
    EXPECT_EQ(sim.core().parts(), s.parts) << what;
    EXPECT_EQ(sim.aborts(), 0) << what;
    // With reads ending first the sends pile up to the bound: the bound is used, not only respected.
    if (s.reads_first) {
      EXPECT_EQ(sim.most_sending(), std::min(s.limit, s.parts)) << what;
    }
  }
}

// Every plan: each first fault at each step, each drain, and each second fault at each later step.
TEST(multipart_upload_core, a_fault_at_every_step_keeps_every_rule) {
  int plans = 0;
  int failing = 0;
  for (const auto& s : schedules()) {
    for (const bool later_fail : {false, true}) {
      const auto report = test::sans_io::every_fault([&] { return simulation(s, later_fail); });
      plans += report.runs;
      for (const auto& f : report.failures) {
        if (failing++ < 20) ADD_FAILURE() << describe(s, later_fail) << " " << f;
      }
    }
  }
  std::printf("[ fault plans ] %d\n", plans);
  EXPECT_GT(plans, 10000);
}

// The cases the rules above leave open, one by one.

std::vector<multipart_action::kind> kinds(const std::vector<multipart_action>& actions) {
  std::vector<multipart_action::kind> out;
  for (const auto& a : actions) out.push_back(a.what);
  return out;
}

TEST(multipart_upload_core, a_cancellation_before_anything_started_creates_nothing) {
  multipart_upload_core core(2);
  core.cancelled(cancel_kind::total);
  EXPECT_EQ(kinds(core.next()), std::vector{kind::finish});
  EXPECT_EQ(core.failure(), boost::asio::error::operation_aborted);
}

TEST(multipart_upload_core, an_upload_created_during_a_cancellation_is_aborted_unless_terminal) {
  for (const auto k : {cancel_kind::partial, cancel_kind::total, cancel_kind::terminal}) {
    multipart_upload_core core(2);
    EXPECT_EQ(kinds(core.next()), std::vector{kind::create});
    core.cancelled(k);
    EXPECT_TRUE(core.next().empty());  // the create is shielded: its answer is awaited
    core.created("id");
    const auto expected = k == cancel_kind::terminal ? std::vector{kind::finish} : std::vector{kind::abort};
    EXPECT_EQ(kinds(core.next()), expected);
  }
}

TEST(multipart_upload_core, a_cancellation_while_completing_does_not_undo_a_completed_upload) {
  multipart_upload_core core(1);
  core.next();
  core.created("id");
  EXPECT_EQ(kinds(core.next()), std::vector{kind::read_part});
  core.part_read(1, 10);
  EXPECT_EQ(kinds(core.next()), (std::vector{kind::send_part, kind::read_part}));
  core.source_ended();
  core.part_sent(1, "e1");
  EXPECT_EQ(kinds(core.next()), std::vector{kind::complete});
  core.cancelled(cancel_kind::total);
  core.completed("object");
  EXPECT_EQ(kinds(core.next()), std::vector{kind::finish});
  EXPECT_FALSE(core.failure());
  EXPECT_EQ(core.etag(), "object");
  EXPECT_EQ(core.bytes(), 10u);
}

TEST(multipart_upload_core, a_terminal_cancellation_during_the_abort_ends_it_with_the_first_failure) {
  multipart_upload_core core(1);
  core.next();
  core.created("id");
  core.next();
  core.source_failed(error_at(1), {"cannot read"});
  const auto abort = core.next();
  ASSERT_EQ(kinds(abort), std::vector{kind::abort});
  EXPECT_EQ(abort[0].stops, cancelled_by::terminal);
  core.cancelled(cancel_kind::total);  // not passed on to the abort
  core.cancelled(cancel_kind::terminal);
  EXPECT_TRUE(core.next().empty());
  core.abort_failed(boost::asio::error::operation_aborted, {});
  EXPECT_EQ(kinds(core.next()), std::vector{kind::finish});
  EXPECT_EQ(core.failure(), error_at(1));
  EXPECT_EQ(core.failure_diagnostics().message, "cannot read");
}

TEST(multipart_upload_core, a_part_read_after_a_failure_is_released_not_sent) {
  multipart_upload_core core(2);
  core.next();
  core.created("id");
  core.next();  // read 1
  core.part_read(1, 10);
  core.next();  // send 1, read 2
  core.part_failed(1, error_at(2), {"refused"});
  EXPECT_TRUE(core.next().empty());  // the read still runs: the abort waits for it
  core.part_read(2, 10);
  const auto actions = core.next();
  ASSERT_EQ(kinds(actions), (std::vector{kind::release_part, kind::abort}));
  EXPECT_EQ(actions[0].part, 2);
}

TEST(multipart_upload_core, an_empty_source_still_completes_as_before) {
  // As the old code did: storage answers an upload without parts with an error, and the upload is aborted.
  multipart_upload_core core(3);
  core.next();
  core.created("id");
  core.next();
  core.source_ended();
  const auto actions = core.next();
  ASSERT_EQ(kinds(actions), std::vector{kind::complete});
  EXPECT_TRUE(actions[0].parts.empty());
}

}  // namespace
}  // namespace ferry::net
