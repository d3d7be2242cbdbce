#pragma once
// `ferry trace tree`: tasks drawn as eliot-tree draws them: each action with its status, start time and
// duration, its fields and messages nested beneath, and its end message last.
//
// A large map repeats itself: a hundred ferry:agent:task under one map, a hundred ferry:materialise:layer
// under one node's materialise. Unless `all` is asked for, siblings of one action type beyond
// `shown_alike` (when that saves at least three) are folded into one line that says how many there are and
// how each ended: "… 97 more ferry:agent:task like these: 94 succeeded, 3 failed (--all shows every one)".
// The first failed, the first cancelled and the first incomplete one of such siblings are always drawn
// whole, and the fold line (after the last one drawn) counts the rest by how they ended, so no failure or
// cancellation disappears without a word. Plain messages never fold.
#include "tracing/task_tree.hpp"

#include <string>

namespace ferry::tracing {

struct tree_view_options {
  bool color = false;  // ANSI colours for status (a TTY)
  bool all = false;    // draw every action, folding nothing
  std::size_t shown_alike = 3;
};

std::string render_tree(const std::vector<task_tree>& tasks, const tree_view_options& options = {});

}  // namespace ferry::tracing
