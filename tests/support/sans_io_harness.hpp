#pragma once
// One fault-injection harness for every sans-io core (net/sans_io.hpp says how a core speaks). A test
// writes a driver, the simulated shell of its core, which plays the core's happy path one operation per
// step and checks the core's own rules; the harness runs that driver to completion once per step with a
// fault injected there (an error, and each kind of cancellation: partial, total, terminal), and again with
// a second fault at every later step (which is how a clean-up's own steps get theirs), and checks what
// every core owes:
//   - it finishes, and never waits while nothing of it runs;
//   - nothing but finish after finish, and done() says so exactly when finish was handed out;
//   - a fault that came while the outcome was open is the outcome: the first one, error or cancellation
//     (a core that retries errors, such as readiness, says so with ends_on_error = false);
//   - a clean-up the driver says was owed was issued.
//
// A driver D (see the tests of multipart_upload_core, exec_lifecycle and readiness_core):
//   D::core_type& core();                      the core; next() and done()
//   static bool is_finish(const action&);      the finish action
//   static constexpr bool ends_on_error;       an error ends the core (false: it retries)
//   void started(const action&);               an action next() handed out (checked, carried out)
//   bool advance(int step, bool fail);         ends one running operation, well or with error_at(step);
//                                              false when none runs
//   void cancel(net::cancel_kind);             the shell heard a cancellation
//   error_code error_at(int step) const;       the error a failure at `step` reports
//   bool settled() const;                      the outcome is known: a fault now changes nothing
//   bool success_wins() const;                 an operation runs whose success is the outcome whatever
//                                              cancellation comes meanwhile (multipart's complete)
//   error_code outcome_error() const;          once finished: the failure, or none
//   bool cleanup_owed() const, cleaned_up() const;
//   const std::vector<std::string>& problems() const;   the driver's own findings
#include "net/cancellation.hpp"
#include "net/sans_io.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ferry::test::sans_io {

using boost::system::error_code;

enum class fault { none, error, partial, total, terminal };
inline constexpr fault all_faults[] = {fault::error, fault::partial, fault::total, fault::terminal};

inline std::string_view name(fault f) {
  switch (f) {
    case fault::none: return "none";
    case fault::error: return "error";
    case fault::partial: return "partial";
    case fault::total: return "total";
    case fault::terminal: break;
  }
  return "terminal";
}

inline bool is_cancellation(fault f) { return f != fault::none && f != fault::error; }

inline net::cancel_kind as_cancel(fault f) {
  if (f == fault::partial) return net::cancel_kind::partial;
  if (f == fault::total) return net::cancel_kind::total;
  return net::cancel_kind::terminal;
}

// A distinct error per step, so that a test sees which failure became the outcome.
inline error_code error_at(int step) { return {1000 + step, boost::system::generic_category()}; }

// Where the faults of one run come. Step 0 is before the core hands out its first action (only a
// cancellation: nothing runs that could fail); step n >= 1 is the n-th operation to end.
struct fault_plan {
  int first_at = -1;
  fault first = fault::none;
  int second_at = -1;
  fault second = fault::none;
  bool second_repeats = false;  // the second fault again at every step after second_at

  fault at(int step) const {
    if (step == first_at) return first;
    if (step == second_at || (second_repeats && second_at >= 0 && step > second_at)) return second;
    return fault::none;
  }
  std::string describe() const {
    return fmt::format("first={}@{} second={}@{}{}", name(first), first_at, name(second), second_at,
                       second_repeats ? " and after" : "");
  }
};

template <typename D>
concept driver = requires(D& d, const D& cd, int step) {
  typename D::core_type;
  { d.core() } -> std::same_as<typename D::core_type&>;
  { D::ends_on_error } -> std::convertible_to<bool>;
  { d.advance(step, true) } -> std::same_as<bool>;
  d.cancel(net::cancel_kind::total);
  { cd.error_at(step) } -> std::convertible_to<error_code>;
  { cd.settled() } -> std::convertible_to<bool>;
  { cd.success_wins() } -> std::convertible_to<bool>;
  { cd.outcome_error() } -> std::convertible_to<error_code>;
  { cd.cleanup_owed() } -> std::convertible_to<bool>;
  { cd.cleaned_up() } -> std::convertible_to<bool>;
  { cd.problems() } -> std::convertible_to<const std::vector<std::string>&>;
} && net::sans_io::core<typename D::core_type>;

// One run of a driver under a plan, and what the harness found.
template <driver D>
class run {
 public:
  static constexpr int max_steps = 1000;

  run(D& d, const fault_plan& plan) : d_(d), plan_(plan) {}

  void play() {
    if (is_cancellation(plan_.at(0))) cancel(plan_.at(0));
    take();
    for (int step = 1; !finished_ && step < max_steps; ++step) {
      const fault f = plan_.at(step);
      if (is_cancellation(f)) {
        cancel(f);
        take();
        if (finished_) break;
      }
      // An error that the core retries is not its outcome.
      if (f == fault::error && D::ends_on_error) note(d_.error_at(step), false);
      ++steps_;
      if (!d_.advance(step, f == fault::error)) {
        problem("the core waits while nothing runs");
        break;
      }
      take();
    }
    if (!finished_) return problem("never finished");
    after_finish();
    check_outcome();
  }

  int steps() const { return steps_; }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  void problem(std::string what) { problems_.push_back(std::move(what)); }

  // A fault the core must report: the first one that came while the outcome was open.
  void note(const error_code& ec, bool cancellation) {
    if (expected_ || d_.settled()) return;
    expected_ = ec;
    success_may_win_ = cancellation && d_.success_wins();
  }

  void cancel(fault f) {
    note(boost::asio::error::operation_aborted, true);
    d_.cancel(as_cancel(f));
  }

  void take() {
    for (const auto& a : net::sans_io::as_set(d_.core().next())) {
      if (finished_ && !D::is_finish(a)) problem("an action after finish");
      d_.started(a);
      if (D::is_finish(a)) finished_ = true;
    }
    if (d_.core().done() != finished_)
      problem(finished_ ? "finish handed out, but the core is not done" : "done before finish was handed out");
  }

  void after_finish() {
    for (const auto& a : net::sans_io::as_set(d_.core().next()))
      if (!D::is_finish(a)) problem("actions after finish");
    if (!d_.core().done()) problem("not done after finish");
  }

  void check_outcome() {
    for (const auto& p : d_.problems()) problem(p);
    if (expected_) {
      const auto got = d_.outcome_error();
      if (got != *expected_ && !(success_may_win_ && !got))
        problem(fmt::format("ended with '{}' ({}) instead of the fault '{}' ({})", got.message(), got.value(),
                            expected_->message(), expected_->value()));
    }
    if (d_.cleanup_owed() && !d_.cleaned_up()) problem("the clean-up it owed was not issued");
  }

  D& d_;
  fault_plan plan_;
  int steps_ = 0;
  bool finished_ = false;
  std::optional<error_code> expected_;  // the first fault that came while the outcome was open
  bool success_may_win_ = false;        // it was a cancellation, and an operation that outranks it ran
  std::vector<std::string> problems_;
};

struct options {
  bool second_faults = true;   // a second fault at every step after the first
  bool second_repeats = false;  // which comes again at every step after its own (a stop that must hold)
};

struct report {
  int runs = 0;
  std::vector<std::string> failures;  // the plan and what went wrong, one per failed run
};

// Runs the happy path, then every plan of faults; `make` gives a fresh driver per run, and `each` (when
// set) sees every driver after its run, for the test's own checks of the outcome.
template <typename Make, typename Each = std::nullptr_t>
  requires driver<std::invoke_result_t<Make&>>
report every_fault(Make make, options opt = {}, Each each = nullptr) {
  using D = std::invoke_result_t<Make&>;
  report out;
  auto play = [&](const fault_plan& plan) {
    auto d = make();
    run<D> r(d, plan);
    r.play();
    ++out.runs;
    if (!r.problems().empty())
      out.failures.push_back(fmt::format("{}: {}", plan.describe(), fmt::join(r.problems(), "; ")));
    if constexpr (!std::is_same_v<Each, std::nullptr_t>) each(std::as_const(d), plan);
    return r.steps();
  };
  const int clean_steps = play(fault_plan{});
  for (int k = 0; k <= clean_steps; ++k) {
    for (const fault f : all_faults) {
      if (k == 0 && f == fault::error) continue;  // nothing runs yet that could fail
      const fault_plan first{k, f};
      const int steps = play(first);
      if (!opt.second_faults) continue;
      for (int j = k + 1; j <= steps; ++j) {
        for (const fault g : all_faults) play(fault_plan{k, f, j, g, opt.second_repeats});
      }
    }
  }
  return out;
}

}  // namespace ferry::test::sans_io
