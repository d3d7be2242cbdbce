#pragma once
// Messages from any number of files, rebuilt into eliot's trees: one per task_uuid, nodes keyed by
// task_level. An action is complete when its start and end are present and every level in between is too.
#include "tracing/trace_file.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tracing {

struct tree_node {
  std::vector<std::uint32_t> level;  // an action's level, or a message's
  const trace_message* start = nullptr;    // actions
  const trace_message* end = nullptr;      // actions
  const trace_message* message = nullptr;  // plain messages
  std::map<std::uint32_t, std::unique_ptr<tree_node>> children;

  bool is_action() const { return message == nullptr; }
  std::string_view type() const;     // action_type or message_type ("" when never seen)
  std::string_view status() const;   // "succeeded", "failed", or "started" when no end was seen
  // status(), but "cancelled" for a failed action whose reason is "cancelled": action::fail writes that for
  // operation_aborted (a Ctrl-C, or a step that a finished race no longer needed). The trace keeps eliot's
  // `failed`, which eliot's parser expects; the views count and colour a cancellation apart from a failure.
  std::string_view outcome() const;
  std::optional<double> start_time() const;
  std::optional<double> end_time() const;
  std::optional<double> duration() const;
  bool complete() const;
  // Whether a ferry:handoff message among the children names this child level (action::hand_off_task_id).
  bool handed_off(std::uint32_t child_level) const;
  // A field of the start message, else of the end message (or of the plain message); null when absent.
  const boost::json::value* field(std::string_view key) const;
  // The level as eliot-tree writes it, "/3/2"; "/" for a task's root.
  std::string level_text() const;
};

struct task_tree {
  std::string uuid;
  std::unique_ptr<tree_node> root;  // level [], an action for tasks started in these files

  bool complete() const { return root->complete(); }
  // The outermost actions: the root when it was written here, else its children (a continued task).
  std::vector<const tree_node*> tops() const;
};

// Tasks in order of their first message's time.
std::vector<task_tree> build_task_trees(const trace_set& traces);

}  // namespace ferry::tracing
