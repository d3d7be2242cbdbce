#pragma once
// `ferry trace tree`: tasks drawn as eliot-tree draws them: each action with its status, start time and
// duration, its fields and messages nested beneath, and its end message last.
#include "tracing/task_tree.hpp"

#include <string>

namespace ferry::tracing {

struct tree_view_options {
  bool color = false;  // ANSI colours for status (a TTY)
};

std::string render_tree(const std::vector<task_tree>& tasks, const tree_view_options& options = {});

}  // namespace ferry::tracing
