#include "tracing/action.hpp"

#include "tracing/action_types.hpp"
#include "tracing/json_text.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/error.hpp>

#include <chrono>
#include <exception>

namespace ferry::tracing {
namespace {

void append_timestamp(text_buffer& out) {
  // Float seconds with microseconds, as eliot writes time.time().
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  fmt::format_to(std::back_inserter(out), "{}.{:06}", us / 1000000, us % 1000000);
}

void append_head(text_buffer& out, const task_uuid& uuid, const task_level& level) {
  out.append(std::string_view(R"({"task_uuid":")"));
  out.append(uuid.view());
  out.append(std::string_view(R"(","task_level":[)"));
  bool first = true;
  for (auto part : level) {
    if (!first) out.push_back(',');
    first = false;
    fmt::format_to(std::back_inserter(out), "{}", part);
  }
  out.append(std::string_view(R"(],"timestamp":)"));
  append_timestamp(out);
}

void emit(sink& out, text_buffer& line, fields f) {
  for (const auto& x : f) append_field(line, x);
  line.push_back('}');
  out.write({line.data(), line.size()});
}

}  // namespace

action::action(sink& out, const task_uuid& uuid, task_level level, std::string_view action_type)
    : sink_(&out), uuid_(uuid), level_(std::move(level)), type_(action_type),
      uncaught_at_start_(std::uncaught_exceptions()) {}

action::action(action&& other) noexcept
    : sink_(other.sink_), uuid_(other.uuid_), level_(std::move(other.level_)), type_(std::move(other.type_)),
      last_child_(other.last_child_.load()), uncaught_at_start_(other.uncaught_at_start_),
      finished_(other.finished_) {
  other.finished_ = true;  // the moved-from shell must not end the action a second time
}

action action::start_task(sink& out, std::string_view action_type, fields f) {
  action a(out, new_task_uuid(), {}, action_type);
  a.start(f);
  return a;
}

action action::continue_task(sink& out, const task_id& parent, std::string_view action_type, fields f) {
  action a(out, parent.uuid, parent.level, action_type);
  a.start(f);
  return a;
}

action::~action() {
  if (finished_) return;
  if (std::uncaught_exceptions() > uncaught_at_start_)
    fail_exception("exception", "unwound by an exception");
  else
    fail(boost::asio::error::operation_aborted, "cancelled");
}

task_level action::next_level() {
  task_level level = level_;
  level.push_back(last_child_.fetch_add(1, std::memory_order_relaxed) + 1);
  return level;
}

void action::start(fields f) {
  text_buffer line;
  append_head(line, uuid_, next_level());
  line.append(std::string_view(R"(,"action_status":"started","action_type":)"));
  append_json_string(line, type_);
  emit(*sink_, line, f);
}

action action::child(std::string_view action_type, fields f) {
  action a(*sink_, uuid_, next_level(), action_type);
  a.start(f);
  return a;
}

void action::log(std::string_view message_type, fields f) {
  text_buffer line;
  append_head(line, uuid_, next_level());
  line.append(std::string_view(R"(,"message_type":)"));
  append_json_string(line, message_type);
  emit(*sink_, line, f);
}

std::string action::serialize_task_id() { return tracing::serialize_task_id(uuid_, next_level()); }

std::string action::hand_off_task_id() {
  const auto level = next_level();
  log(action_types::tracing::handoff, {{"level", static_cast<std::int64_t>(level.back())}});
  return tracing::serialize_task_id(uuid_, level);
}

void action::end(std::string_view status, std::string_view exception, std::string_view reason, fields f) {
  if (finished_) return;
  finished_ = true;
  text_buffer line;
  append_head(line, uuid_, next_level());
  line.append(std::string_view(R"(,"action_status":")"));
  line.append(status);
  line.append(std::string_view(R"(","action_type":)"));
  append_json_string(line, type_);
  if (!exception.empty()) {
    line.append(std::string_view(R"(,"exception":)"));
    append_json_string(line, exception);
    line.append(std::string_view(R"(,"reason":)"));
    append_json_string(line, redact_text(reason));
  }
  emit(*sink_, line, f);
}

void action::succeed(fields f) { end("succeeded", {}, {}, f); }

void action::fail(const error_code& ec, std::string_view reason, fields f) {
  if (ec == boost::asio::error::operation_aborted) {
    end("failed", "cancelled", "cancelled", f);
    return;
  }
  const std::string exception = fmt::format("{}:{}", ec.category().name(), ec.value());
  end("failed", exception, reason.empty() ? std::string_view(ec.message()) : reason, f);
}

void action::fail_exception(std::string_view exception, std::string_view reason) {
  end("failed", exception, reason, {});
}

void action::finish(const error_code& ec, const diagnostics& diag, fields f) {
  if (ec)
    fail(ec, diag, f);
  else
    succeed(f);
}

}  // namespace ferry::tracing
