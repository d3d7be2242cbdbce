#include "tracing/task_tree.hpp"

#include "tracing/action_types.hpp"

#include <algorithm>
#include <unordered_map>

namespace ferry::tracing {
namespace {

std::string_view string_field(const trace_message* m, std::string_view key) {
  if (!m) return {};
  const auto* v = m->fields.if_contains(key);
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view{};
}

std::vector<std::uint32_t> level_of(const trace_message& m) {
  std::vector<std::uint32_t> level;
  for (const auto& part : m.fields.at("task_level").get_array())
    level.push_back(static_cast<std::uint32_t>(part.get_int64()));
  return level;
}

tree_node& node_at(tree_node& root, const std::vector<std::uint32_t>& level, std::size_t depth) {
  tree_node* node = &root;
  for (std::size_t i = 0; i < depth; ++i) {
    auto& slot = node->children[level[i]];
    if (!slot) {
      slot = std::make_unique<tree_node>();
      slot->level.assign(level.begin(), level.begin() + static_cast<std::ptrdiff_t>(i + 1));
    }
    node = slot.get();
  }
  return *node;
}

void add(tree_node& root, const trace_message& m) {
  const auto level = level_of(m);
  if (!m.fields.contains("action_status")) {
    node_at(root, level, level.size()).message = &m;
    return;
  }
  // An action's own messages sit one level below it: the first starts it, the last ends it.
  auto& action = node_at(root, level, level.size() - 1);
  if (string_field(&m, "action_status") == "started")
    action.start = &m;
  else
    action.end = &m;
}

}  // namespace

std::string_view tree_node::type() const {
  if (message) return string_field(message, "message_type");
  auto t = string_field(start, "action_type");
  return t.empty() ? string_field(end, "action_type") : t;
}

std::string_view tree_node::status() const {
  if (end) return string_field(end, "action_status");
  return start ? "started" : "";
}

std::string_view tree_node::outcome() const {
  const auto s = status();
  if (s == "failed" && string_field(end, "reason") == "cancelled") return "cancelled";
  return s;
}

std::optional<double> tree_node::start_time() const {
  if (message) return message->timestamp;
  if (start) return start->timestamp;
  return std::nullopt;
}

std::optional<double> tree_node::end_time() const {
  if (message) return message->timestamp;
  if (end) return end->timestamp;
  return std::nullopt;
}

std::optional<double> tree_node::duration() const {
  if (!start || !end) return std::nullopt;
  return end->timestamp - start->timestamp;
}

bool tree_node::handed_off(std::uint32_t child_level) const {
  for (const auto& [_, c] : children) {
    if (!c->message || c->type() != action_types::tracing::handoff) continue;
    const auto* l = c->message->fields.if_contains("level");
    if (l && l->is_int64() && l->get_int64() == static_cast<std::int64_t>(child_level)) return true;
  }
  return false;
}

bool tree_node::complete() const {
  if (message) return true;
  if (!start || !end) return false;
  // Levels are dense: between the start (1) and the end (n) every child level 2..n-1 must be present,
  // except one handed to another process that never wrote (a ferry:handoff message names it).
  const auto end_last = end->fields.at("task_level").get_array().back().get_int64();
  for (std::int64_t l = 2; l < end_last; ++l) {
    if (!children.contains(static_cast<std::uint32_t>(l)) && !handed_off(static_cast<std::uint32_t>(l))) return false;
  }
  return std::all_of(children.begin(), children.end(), [](const auto& c) { return c.second->complete(); });
}

const boost::json::value* tree_node::field(std::string_view key) const {
  for (const auto* m : {start, end, message})
    if (m)
      if (const auto* v = m->fields.if_contains(key)) return v;
  return nullptr;
}

std::string tree_node::level_text() const {
  if (level.empty()) return "/";
  std::string out;
  for (auto part : level) (out += '/') += std::to_string(part);
  return out;
}

std::vector<const tree_node*> task_tree::tops() const {
  if (root->start || root->end || root->message) return {root.get()};
  std::vector<const tree_node*> out;
  for (const auto& [_, child] : root->children) out.push_back(child.get());
  return out;
}

std::vector<task_tree> build_task_trees(const trace_set& traces) {
  std::vector<task_tree> tasks;
  std::unordered_map<std::string, std::size_t> index;
  for (const auto& m : traces.messages) {
    std::string uuid(m.fields.at("task_uuid").get_string());
    auto [it, inserted] = index.try_emplace(uuid, tasks.size());
    if (inserted) tasks.push_back({uuid, std::make_unique<tree_node>()});
    auto& task = tasks[it->second];
    const auto level = level_of(m);
    // A message at [1] with no action is a whole task of its own, as in eliot.
    if (level.size() == 1 && !m.fields.contains("action_status") && level[0] == 1 && !task.root->start) {
      task.root->message = &m;
      continue;
    }
    add(*task.root, m);
  }
  return tasks;
}

}  // namespace ferry::tracing
