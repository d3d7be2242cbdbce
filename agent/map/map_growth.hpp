#pragma once
// When a map takes more nodes than it started with, without any I/O. A map starts on nodes.count nodes (or
// --nodes); it grows only when its waiting tasks, at the pace its tasks have shown, would wait longer than
// a new node takes to be ready, and then by as many nodes as bring that wait down to about one node's
// start, never past nodes.max_nodes nor past one node per `per_node` waiting tasks. A few hundred short
// tasks do not grow a map: they have all run before a new node would be ready.
#include <cstddef>
#include <string>

namespace ferry::agent {

struct map_pace {
  std::size_t waiting = 0;     // tasks not yet started
  std::size_t nodes = 0;       // nodes working or on their way
  std::size_t per_node = 1;    // tasks at once on each node
  std::size_t max_nodes = 1;   // nodes.max_nodes
  double task_seconds = 0;     // what a task takes, as far as the map has seen; 0: not known yet
  double node_seconds = 0;     // what a new node takes to be ready
};

struct map_growth {
  std::size_t add = 0;        // nodes to add now; 0: none
  double wait_seconds = 0;    // how long the last waiting task would wait without them
};

map_growth growth_of(const map_pace& p);

// "40 tasks would wait 120 s at 12.0 s a task; a new node takes about 8 s: 7 more nodes (8 in all, ...)"
std::string growth_line(const map_pace& p, const map_growth& g);

}  // namespace ferry::agent
