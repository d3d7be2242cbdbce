#pragma once
// How ferry's sans-io cores talk to the async shells that drive them. A core holds the decisions of one
// protocol (net/multipart_upload_core, net/exec_lifecycle, provision/readiness_core) and no I/O, no clock
// and no Asio state; its shell makes the calls, does the waiting, and reports what happened. Every core
// speaks the same way, so that a reader who knows one knows them all, and one fault-injection harness
// (tests/support/sans_io_harness.hpp) tests them all:
//
// - What next: `next()`, the one question. It returns the core's action: one action when the core runs one
//   operation at a time (exec_lifecycle, readiness_core), or a std::vector of actions that the shell starts
//   together and runs in parallel (multipart_upload_core). A one-action core's next() is const and says the
//   same until an event changes it, so the shell may ask again; a set's next() hands out each action once,
//   and an empty set means "wait for what runs".
// - Results: events, member functions named for what happened (`created`, `part_sent`, `opened`,
//   `described`), one per outcome; a failure is `..._failed(ec, ...)`, and the shell's cancellation is
//   `cancelled(cancel_kind, ...)` (net/cancellation.hpp) whenever it hears one. The core never calls out;
//   times come in with the events (`now`), and waits go out in the actions.
// - Done: the action kind `finish` (each core's action enum has one), after which next() hands out nothing
//   but finish again (one action) or nothing (a set); `done()` says the same. The outcome is read then.
//   A core that promises clean-up (an abort, a kill) hands it out before finish, and says in its header
//   which cancellation kinds, if any, cut the clean-up short.
#include "net/cancellation.hpp"

#include <concepts>
#include <span>
#include <vector>

namespace ferry::net::sans_io {

// A core of the convention above.
template <typename Core>
concept core = requires(Core& c, const Core& cc) {
  c.next();
  { cc.done() } -> std::convertible_to<bool>;
};

// next()'s answer as a set, whichever of the two shapes the core uses: for code (the harness) that drives
// cores of both.
template <typename Action>
std::vector<Action> as_set(std::vector<Action> actions) {
  return actions;
}
template <typename Action>
std::vector<Action> as_set(Action action) {
  return {std::move(action)};
}

}  // namespace ferry::net::sans_io
