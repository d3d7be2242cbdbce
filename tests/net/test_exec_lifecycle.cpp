// The exec channel's lifecycle core on its own, no Asio and no sshd: the group id line split every way,
// the channel cap's retries, and scripted runs with a failure or a cancellation injected before every
// event by the sans-io harness (tests/support/sans_io_harness.hpp). The real channel against sshd is in
// test_ssh_exec.cpp and test_ssh_failures.cpp.
#include "net/error.hpp"
#include "net/exec_group_line.hpp"
#include "net/exec_lifecycle.hpp"

#include "support/sans_io_harness.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace ferry::net {
namespace {

using namespace std::chrono_literals;

std::string text(std::span<const char> s) { return {s.data(), s.size()}; }

// ---- The group id line ----

struct parsed {
  std::optional<long> group;
  std::string output;  // what the command printed, as passed on
};

// Feeds `stream` cut at `cuts` (ascending positions), then ends it.
parsed parse_cut(std::string_view stream, const std::vector<std::size_t>& cuts) {
  exec_group_line line;
  parsed p;
  std::size_t from = 0;
  auto feed = [&](std::size_t to) {
    p.output += text(line.take(std::span<const char>(stream.data() + from, to - from)));
    from = to;
  };
  for (const auto cut : cuts) feed(cut);
  feed(stream.size());
  p.output += text(line.end());
  p.group = line.group();
  return p;
}

parsed parse_bytewise(std::string_view stream) {
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < stream.size(); ++i) cuts.push_back(i);
  return parse_cut(stream, cuts);
}

// Every split in two and in three, and byte by byte, parse as the whole stream at once does.
void expect_split_invariant(std::string_view stream, std::optional<long> group, std::string_view output) {
  const auto whole = parse_cut(stream, {});
  EXPECT_EQ(whole.group, group) << stream;
  EXPECT_EQ(whole.output, output) << stream;
  for (std::size_t i = 0; i <= stream.size(); ++i) {
    for (std::size_t j = i; j <= stream.size(); ++j) {
      const auto p = parse_cut(stream, {i, j});
      ASSERT_EQ(p.group, group) << "cut at " << i << " and " << j << ": " << stream;
      ASSERT_EQ(p.output, output) << "cut at " << i << " and " << j << ": " << stream;
    }
  }
  const auto bytes = parse_bytewise(stream);
  EXPECT_EQ(bytes.group, group);
  EXPECT_EQ(bytes.output, output);
}

TEST(exec_group_line, the_line_is_taken_out_wherever_the_chunks_split_it) {
  expect_split_invariant("ferry-exec-pgid=4242\nhello\n", 4242, "hello\n");
  expect_split_invariant("ferry-exec-pgid=77\n", 77, "");
}

TEST(exec_group_line, what_the_login_shell_printed_first_is_dropped_with_the_line) {
  expect_split_invariant("welcome\nmotd\nferry-exec-pgid=913\nout\nmore", 913, "out\nmore");
}

TEST(exec_group_line, only_a_whole_valid_line_at_a_line_start_counts) {
  expect_split_invariant("xferry-exec-pgid=5\nferry-exec-pgid=1\nferry-exec-pgid=-3\nferry-exec-pgid=12x\n"
                         "ferry-exec-pgid=\nferry-exec-pgid=88\nrest",
                         88, "rest");
  // A later marker line in the command's own output is output.
  expect_split_invariant("ferry-exec-pgid=10\nferry-exec-pgid=11\n", 10, "ferry-exec-pgid=11\n");
}

TEST(exec_group_line, without_the_line_every_byte_is_the_commands_output) {
  expect_split_invariant("plain output\nno marker", std::nullopt, "plain output\nno marker");
  expect_split_invariant("ferry-exec-pgid=123", std::nullopt, "ferry-exec-pgid=123");  // never whole
  expect_split_invariant("", std::nullopt, "");
}

TEST(exec_group_line, the_preamble_limit_does_not_depend_on_the_chunks) {
  constexpr auto max = exec_group_line::max_preamble;
  const std::string line = "ferry-exec-pgid=321\n";
  // The line's newline is the last byte allowed: found.
  const std::string fits = std::string(max - line.size(), 'p') + "\n" + line + "tail";
  // One byte more of preamble: the wrapper did not run, all of it is output.
  const std::string late = "p" + fits;
  for (const auto& [stream, group, out] :
       {std::tuple{fits, std::optional<long>(321), std::string("tail")}, std::tuple{late, std::optional<long>(), late}}) {
    const auto whole = parse_cut(stream, {});
    EXPECT_EQ(whole.group, group);
    EXPECT_EQ(whole.output, out);
    const auto bytes = parse_bytewise(stream);
    EXPECT_EQ(bytes.group, group);
    EXPECT_EQ(bytes.output, out);
    for (const std::size_t cut : {std::size_t{1}, max - 30, max - 5, max, max + 1, stream.size() - 1}) {
      const auto p = parse_cut(stream, {cut});
      EXPECT_EQ(p.group, group) << cut;
      EXPECT_EQ(p.output, out) << cut;
    }
  }
}

// ---- Opening on a node that caps channels ----

const exec_limits limits{.kill_grace = 1500ms, .drain_margin = 2s, .retry_delay = 20ms};
const error_code refused = make_error_code(errc::ssh_channel_failed);

exec_lifecycle command_core() { return exec_lifecycle(exec_lifecycle::kind::command, limits, "node n1", "sleep 9"); }

open_failure full(int others, bool capped = false, std::chrono::milliseconds left = 1s) {
  return {refused, true, true, others, capped, left};
}

TEST(exec_lifecycle_open, a_refusal_while_others_of_ours_are_open_waits_for_one_of_them) {
  auto core = command_core();
  EXPECT_EQ(core.next().action, exec_action::open);
  EXPECT_FALSE(core.next().learn_limit);
  core.open_failed(full(3));
  const auto step = core.next();
  EXPECT_EQ(step.action, exec_action::open);
  EXPECT_EQ(step.learn_limit, 3);
  EXPECT_EQ(step.wait, 0ms);
  core.opened();
  EXPECT_EQ(core.next().action, exec_action::request);
  EXPECT_FALSE(core.next().learn_limit);
}

TEST(exec_lifecycle_open, with_none_of_ours_open_a_known_cap_asks_again_shortly_while_time_is_left) {
  auto core = command_core();
  core.open_failed(full(0, true, 500ms));
  EXPECT_EQ(core.next().action, exec_action::open);
  EXPECT_EQ(core.next().wait, limits.retry_delay);
  EXPECT_FALSE(core.next().learn_limit);
  core.open_failed(full(0, true, 20ms));  // no time left for another delay
  EXPECT_EQ(core.next().action, exec_action::finish);
  diagnostics diag;
  EXPECT_EQ(core.outcome(diag).error(), refused);
}

TEST(exec_lifecycle_open, a_refusal_that_is_not_for_lack_of_channels_fails_without_a_kill) {
  for (const auto& f : {open_failure{refused, true, false, 3, true, 1s},       // a real refusal
                        open_failure{refused, true, true, 0, false, 1s},       // none of ours, no cap known
                        open_failure{refused, false, true, 3, true, 1s},       // the session is gone
                        open_failure{make_error_code(errc::timeout), true, true, 3, true, 1s}}) {  // stale text
    auto core = command_core();
    core.open_failed(f);
    EXPECT_EQ(core.next().action, exec_action::finish);
    diagnostics diag;
    EXPECT_EQ(core.outcome(diag).error(), f.ec);
  }
}

TEST(exec_lifecycle_kill, the_kill_line_sends_term_then_kill_after_the_grace) {
  auto core = command_core();
  core.opened();
  core.requesting();
  core.started();
  (void)core.take_stdout(std::span<const char>(std::string_view("ferry-exec-pgid=4321\n")));
  core.cancelled(cancel_kind::total, true);
  const auto step = core.next();
  EXPECT_EQ(step.action, exec_action::kill);
  EXPECT_EQ(step.group, 4321);
  EXPECT_EQ(step.wait, limits.kill_grace + limits.drain_margin);
  EXPECT_EQ(core.kill_line(),
            "g=4321; kill -s TERM -- -$g 2>/dev/null || exit 0; n=0; while kill -s 0 -- -$g 2>/dev/null; do "
            "if [ $n -ge 15 ]; then kill -s KILL -- -$g 2>/dev/null; exit 0; fi; sleep 0.1; n=$((n+1)); done");
}

TEST(exec_lifecycle_kill, an_unknown_group_is_reported_as_still_running) {
  auto core = command_core();
  core.opened();
  core.requesting();
  core.cancelled(cancel_kind::partial, true);
  EXPECT_EQ(core.next().action, exec_action::await_group);
  EXPECT_EQ(core.next().wait, limits.kill_grace);
  core.group_wait_over();
  EXPECT_EQ(core.next().action, exec_action::report_unknown);
  diagnostics diag;
  EXPECT_EQ(core.unknown_group(diag), refused);
  EXPECT_EQ(diag.message, "the process group of the command on node n1 is unknown: it may still run");
  core.unknown_reported();
  EXPECT_EQ(core.next().action, exec_action::finish);
  EXPECT_EQ(core.outcome(diag).error(), boost::asio::error::operation_aborted);
}

TEST(exec_lifecycle_end, a_channel_closed_without_status_or_signal_is_a_channel_failure) {
  auto core = command_core();
  core.opened();
  core.requesting();
  core.started();
  core.peer_closed();
  core.output_eof();
  ASSERT_TRUE(core.ended());
  core.completed();
  diagnostics diag;
  EXPECT_EQ(core.outcome(diag).error(), refused);
  EXPECT_EQ(diag.message, "node n1 closed the channel of 'sleep 9' without an exit status");
}

// ---- Scripted runs with a fault before every event ----

struct event {
  enum class type { full, opened, requesting, started, out, status, signal, closed, eof } what;
  std::string bytes;
  int number = 0;
};

struct script {
  std::string name;
  exec_lifecycle::kind kind = exec_lifecycle::kind::command;
  std::vector<event> events;
  std::optional<long> group;  // what the stream's group id line says
  std::string output;         // the command's own stdout
};

struct fault {
  std::string name;
  error_code ec;
  bool session_open = true;
  std::optional<cancel_kind> cancel;  // a cancellation rather than a failure
};

// The failures the harness's error stands for, each run of the harness with one of them; its
// cancellations come with the same session: open, or closed ("cancel on a closed session").
std::vector<fault> errors() {
  const auto sink_failed = make_error_code(errc::output_too_large);
  return {
      {"channel failure", refused},
      {"connection lost", make_error_code(errc::connection_lost), false},
      {"sink failed", sink_failed},
  };
}

void inject(exec_lifecycle& core, const fault& f) {
  if (f.cancel) {
    core.cancelled(*f.cancel, f.session_open);
  } else {
    core.failed(f.ec, f.session_open);
  }
}

// What a shell driven by the core did.
struct run_record {
  std::string passed;  // output passed on to the sink
  std::optional<long> killed;
  bool awaited_group = false;
  bool reported_unknown = false;
  result<exit_info> outcome = exit_info{};
  std::vector<std::string> problems;
};

// What the core must have done, from the script and where the fault came.
struct expectation {
  bool stops = false;  // the command may outlive the fault: it is killed, or reported unknown
  bool finished_first = false;
};

expectation expect(const script& s, const fault& f, std::size_t at) {
  using t = event::type;
  bool requested = false, started = false, eof = false, exited = false;
  expectation e;
  for (std::size_t i = 0; i < at && i < s.events.size(); ++i) {
    const auto w = s.events[i].what;
    requested = requested || w == t::requesting;
    started = started || w == t::started;
    eof = eof || w == t::eof;
    exited = exited || w == t::status || w == t::signal || w == t::closed;
  }
  e.finished_first = eof && exited;
  const bool refused_at_start = !f.cancel && !started;
  e.stops = !e.finished_first && s.kind == exec_lifecycle::kind::command && requested && !refused_at_start &&
            f.session_open;
  return e;
}

// The shell, for the harness: each step applies the script's next event, or, once a fault came, takes the
// next stopping step; a fault that comes while stopping must change nothing.
class shell_sim {
 public:
  using core_type = exec_lifecycle;
  static constexpr bool ends_on_error = true;

  // `error`: what the harness's error is, and whether the session is open for its cancellations too;
  // `later`: the same for the faults that come while stopping.
  shell_sim(const script& s, fault error, fault later)
      : script_(&s), error_(std::move(error)), later_(std::move(later)), core_(s.kind, limits, "node n1", "the command") {}

  exec_lifecycle& core() { return core_; }
  static bool is_finish(const exec_step& s) { return s.action == exec_action::finish; }
  void started(const exec_step& s) {
    if (s.action != exec_action::finish) return;
    diagnostics diag;
    record_.outcome = core_.outcome(diag);
  }
  error_code error_at(int) const { return error_.ec; }
  bool settled() const { return core_.done(); }
  bool success_wins() const { return false; }
  error_code outcome_error() const { return record_.outcome ? error_code{} : record_.outcome.error(); }
  bool cleanup_owed() const { return first_ && expect(*script_, *first_, first_at_).stops; }
  bool cleaned_up() const { return record_.killed || record_.reported_unknown; }
  const std::vector<std::string>& problems() const { return record_.problems; }

  void cancel(cancel_kind k) {
    const auto* names = k == cancel_kind::partial ? "partial cancel"
                        : k == cancel_kind::total ? "total cancel"
                                                  : "terminal cancel";
    take_fault(fault{names, boost::asio::error::operation_aborted, (first_ ? later_ : error_).session_open, k});
  }

  bool advance(int, bool fail) {
    if (fail) {
      const bool stopping = first_.has_value();
      take_fault(stopping ? later_ : error_);
      if (!stopping) return true;
    }
    if (first_) return stop_step();
    if (next_ >= script_->events.size()) return false;
    apply(script_->events[next_++]);
    return true;
  }

  const script& played() const { return *script_; }
  const run_record& record() const { return record_; }
  // The first fault, and the events applied before it; none when the core finished first.
  const std::optional<fault>& first() const { return first_; }
  std::size_t first_at() const { return first_at_; }

 private:
  void problem(std::string what) { record_.problems.push_back(std::move(what)); }

  void take_fault(const fault& f) {
    if (!first_) {
      first_ = f;
      first_at_ = next_;
    }
    inject(core_, f);
  }

  void expect_action(exec_action a, const char* event) {
    if (core_.next().action != a) problem(fmt::format("{} while the core wanted {}", event, int(core_.next().action)));
  }

  void apply(const event& e) {
    using t = event::type;
    switch (e.what) {
      case t::full:
        expect_action(exec_action::open, "a refusal");
        core_.open_failed(full(e.number));
        break;
      case t::opened:
        expect_action(exec_action::open, "opened");
        core_.opened();
        break;
      case t::requesting:
        expect_action(exec_action::request, "requesting");
        core_.requesting();
        break;
      case t::started:
        expect_action(exec_action::request, "started");
        core_.started();
        break;
      case t::out: {
        const auto rest = text(core_.take_stdout(std::span<const char>(e.bytes)));
        if (core_.passes_output()) record_.passed += rest;
        break;
      }
      case t::status:
        core_.exit_status(e.number);
        break;
      case t::signal:
        core_.exit_signal(e.bytes, false);
        break;
      case t::closed:
        core_.peer_closed();
        break;
      case t::eof:
        core_.output_eof();
        break;
    }
    if (core_.next().action == exec_action::pump && core_.ended()) {
      record_.passed += text(core_.end_of_stdout());
      core_.completed();
    }
  }

  // One stopping step; the kill is two (its channel ends, then the drain of this one).
  bool stop_step() {
    if (++stop_steps_ > 10) {
      problem("the stop did not finish");
      return false;
    }
    const auto step = core_.next();
    switch (step.action) {
      case exec_action::await_group:
        record_.awaited_group = true;
        read_for_group();
        core_.group_wait_over();
        return true;
      case exec_action::kill:
        if (record_.killed && !drained_) {
          drained_ = true;
          core_.drain_over();
          return true;
        }
        if (step.group <= 1 || step.group != core_.group()) problem("a kill without a known group");
        if (record_.killed) problem("killed twice");
        record_.killed = step.group;
        core_.kill_finished(exit_info{0});
        return true;
      case exec_action::report_unknown:
        if (core_.group()) problem("reported unknown with a known group");
        record_.reported_unknown = true;
        core_.unknown_reported();
        return true;
      default:
        problem(fmt::format("after a fault the core wants {}", int(step.action)));
        return false;
    }
  }

  // The command runs on meanwhile: the rest of its stdout (read and dropped) may hold the line.
  void read_for_group() {
    for (; next_ < script_->events.size() && !core_.group() && !core_.ended(); ++next_) {
      const auto& e = script_->events[next_];
      using t = event::type;
      if (e.what == t::out || e.what == t::status || e.what == t::signal || e.what == t::closed ||
          e.what == t::eof) {
        const auto before = record_.passed;
        apply(e);
        // A cancelled command's last words still reach the sink; after a failure they are dropped.
        if (record_.passed != before && !core_.cancellation()) problem("output passed on while stopping a failure");
      }
    }
  }

  const script* script_;
  fault error_;
  fault later_;
  exec_lifecycle core_;
  run_record record_;
  std::size_t next_ = 0;
  std::optional<fault> first_;
  std::size_t first_at_ = 0;
  int stop_steps_ = 0;
  bool drained_ = false;
};

event ev(event::type t, std::string bytes = {}, int n = 0) { return {t, std::move(bytes), n}; }

// A command whose stdout (with the group id line) comes cut at `cut`.
script command_script(std::string name, std::string_view stream, std::size_t cut, std::optional<long> group,
                      std::string output, std::vector<event> ending) {
  using t = event::type;
  script s{std::move(name), exec_lifecycle::kind::command, {}, group, std::move(output)};
  s.events = {ev(t::full, {}, 2), ev(t::opened), ev(t::requesting), ev(t::started)};
  s.events.push_back(ev(t::out, std::string(stream.substr(0, cut))));
  s.events.push_back(ev(t::out, std::string(stream.substr(cut))));
  for (auto& e : ending) s.events.push_back(std::move(e));
  return s;
}

std::vector<script> scripts() {
  using t = event::type;
  std::vector<script> all;
  const std::string with_line = "motd\nferry-exec-pgid=4242\nhello\n";
  const std::string without_line = "no wrapper here\n";
  for (std::size_t cut = 0; cut <= with_line.size(); ++cut) {
    all.push_back(command_script(fmt::format("exits, cut at {}", cut), with_line, cut, 4242, "hello\n",
                                 {ev(t::status, {}, 3), ev(t::eof), ev(t::closed)}));
  }
  for (std::size_t cut = 0; cut <= without_line.size(); ++cut) {
    all.push_back(command_script(fmt::format("no line, cut at {}", cut), without_line, cut, std::nullopt,
                                 without_line, {ev(t::eof), ev(t::status, {}, 0)}));
  }
  all.push_back(command_script("killed by a signal", with_line, 9, 4242, "hello\n",
                               {ev(t::eof), ev(t::signal, "TERM"), ev(t::closed)}));
  all.push_back(command_script("closed without a status", with_line, 20, 4242, "hello\n",
                               {ev(t::eof), ev(t::closed)}));
  script kill{"the kill channel", exec_lifecycle::kind::kill, {}, std::nullopt, "ferry-exec-pgid=5\n"};
  kill.events = {ev(t::opened), ev(t::requesting), ev(t::started), ev(t::out, "ferry-exec-pgid=5\n"),
                 ev(t::status, {}, 0), ev(t::eof)};
  all.push_back(kill);
  return all;
}

// After a run with a fault planned: what the core killed and reported, beside what the harness checks.
void check(const shell_sim& d, const test::sans_io::fault_plan& plan) {
  const auto& s = d.played();
  const auto& r = d.record();
  const auto where = fmt::format("{}: {}", s.name, plan.describe());
  const auto e = d.first() ? expect(s, *d.first(), d.first_at()) : expectation{false, true};
  if (e.finished_first) {
    EXPECT_FALSE(r.awaited_group || r.killed || r.reported_unknown) << where;
    return;
  }
  const auto& f = *d.first();
  ASSERT_TRUE(r.outcome.has_error()) << where;
  EXPECT_EQ(r.outcome.error(), f.ec) << where;
  if (!e.stops) {
    EXPECT_FALSE(r.awaited_group || r.killed || r.reported_unknown) << where;
  } else if (s.group) {
    EXPECT_EQ(r.killed, s.group) << where;  // TERM, then KILL after the grace: the kill line
    EXPECT_FALSE(r.reported_unknown) << where;
  } else {
    EXPECT_FALSE(r.killed) << where;
    EXPECT_TRUE(r.reported_unknown) << where;
  }
  EXPECT_TRUE(s.output.starts_with(r.passed)) << where << ": passed '" << r.passed << "'";
}

TEST(exec_lifecycle_faults, every_script_runs_to_its_end_without_a_fault) {
  for (const auto& s : scripts()) {
    shell_sim d(s, errors()[0], errors()[0]);
    test::sans_io::run<shell_sim> run(d, {});
    run.play();
    const auto& r = d.record();
    for (const auto& p : run.problems()) ADD_FAILURE() << s.name << ": " << p;
    EXPECT_EQ(r.passed, s.output) << s.name;
    EXPECT_FALSE(r.killed || r.awaited_group || r.reported_unknown) << s.name;
    const auto& last = s.events[s.events.size() - 2];
    if (s.name == "closed without a status") {
      EXPECT_EQ(r.outcome.error(), refused);
    } else if (last.what == event::type::signal) {
      ASSERT_TRUE(r.outcome) << s.name;
      EXPECT_EQ(r.outcome->signal, "TERM");
    } else {
      ASSERT_TRUE(r.outcome) << s.name << ": " << r.outcome.error().message();
      EXPECT_TRUE(r.outcome->status) << s.name;
    }
  }
}

// Each fault before every event, its error each of errors(); and a second fault (again each of errors()
// for its kind and session) at every later step, again at each step after it: it changes neither the kill
// nor the result.
TEST(exec_lifecycle_faults, a_fault_before_every_event_kills_exactly_what_may_still_run) {
  int checked_cases = 0;
  for (const auto& s : scripts()) {
    for (const auto& error : errors()) {
      for (const auto& later : errors()) {
        const auto report = test::sans_io::every_fault(
            [&] { return shell_sim(s, error, later); }, {.second_faults = true, .second_repeats = true},
            [](const shell_sim& d, const test::sans_io::fault_plan& p) {
              if (p.first != test::sans_io::fault::none) check(d, p);
            });
        checked_cases += report.runs;
        for (const auto& f : report.failures)
          ADD_FAILURE() << s.name << " with " << error.name << ", then " << later.name << ": " << f;
      }
    }
  }
  RecordProperty("cases", checked_cases);
  std::printf("exec_lifecycle: %d fault-injection cases\n", checked_cases);
  EXPECT_GT(checked_cases, 1000);
}

}  // namespace
}  // namespace ferry::net
