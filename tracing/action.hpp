#pragma once
// An eliot action: a timed, nested step that ends as succeeded or failed. It is an RAII scope: the object
// lives in the coroutine frame of the step it describes, and an action destroyed before it was finished
// (its coroutine was cancelled and its frame torn down, or an exception unwound it) still writes its end
// message, so no action is ever left open. The trace context is this object, passed explicitly: coroutines
// hop threads, so nothing here is thread_local.
#include "tracing/diagnostics.hpp"
#include "tracing/field.hpp"
#include "tracing/task_id.hpp"

#include <atomic>
#include <initializer_list>
#include <string>
#include <string_view>

namespace ferry::tracing {

class sink;
using fields = std::initializer_list<field>;

class action {
 public:
  // The root action of a new task.
  static action start_task(sink& out, std::string_view action_type, fields f = {});
  // An action that continues a task started by another process (eliot's continue_task).
  static action continue_task(sink& out, const task_id& parent, std::string_view action_type, fields f = {});

  action(action&& other) noexcept;
  action& operator=(action&&) = delete;
  action(const action&) = delete;
  ~action();

  // Starts a nested action. Children may be started from any thread.
  action child(std::string_view action_type, fields f = {});
  // A message inside this action.
  void log(std::string_view message_type, fields f = {});
  // The id a process started now should continue (eliot's serialize_task_id); it takes one level.
  std::string serialize_task_id();
  // serialize_task_id for a process that may never write to the trace (a user's command, which
  // continues the task only if it uses eliot): a `ferry:handoff` message names the level it was given,
  // so ferry's own views know an empty level there is not a lost message. (Eliot's parser, which cannot
  // know that, calls such a tree incomplete.)
  std::string hand_off_task_id();

  void succeed(fields f = {});
  // Ends as failed. operation_aborted (a cancelled coroutine) ends with reason "cancelled".
  void fail(const error_code& ec, std::string_view reason, fields f = {});
  void fail(const error_code& ec, const diagnostics& diag, fields f = {}) { fail(ec, describe(ec, diag), f); }
  void fail_exception(std::string_view exception, std::string_view reason);
  // Succeeds when `ec` is empty, fails with it otherwise.
  void finish(const error_code& ec, const diagnostics& diag, fields f = {});
  template <class T>
  void finish(const result<T>& r, const diagnostics& diag, fields f = {}) {
    finish(r.has_error() ? r.error() : error_code{}, diag, f);
  }

  bool finished() const { return finished_; }
  std::string_view action_type() const { return type_; }
  const task_uuid& uuid() const { return uuid_; }
  sink& output() const { return *sink_; }

 private:
  action(sink& out, const task_uuid& uuid, task_level level, std::string_view action_type);
  void start(fields f);
  void end(std::string_view status, std::string_view exception, std::string_view reason, fields f);
  task_level next_level();

  sink* sink_;
  task_uuid uuid_;
  task_level level_;
  std::string type_;
  std::atomic<std::uint32_t> last_child_{0};
  int uncaught_at_start_;
  bool finished_ = false;
};

}  // namespace ferry::tracing
