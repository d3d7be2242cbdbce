#include "tracing/critical_path.hpp"

#include <algorithm>
#include <deque>

namespace ferry::tracing {
namespace {

struct stretch {
  const tree_node* action;
  std::size_t depth;
  interval time;
  std::string_view node;
};

struct timed_child {
  const tree_node* node;
  interval time;
};

std::vector<timed_child> children_latest_first(const tree_node& n, const interval& time,
                                               const trace_conventions& conventions) {
  std::vector<timed_child> out;
  for (const auto& [_, child] : n.children)
    if (child->is_action() && !conventions.is_background(child->type()))
      out.push_back({child.get(), known_interval(*child, time)});
  // Latest end first; of two that end together, the longer one, which explains more of the time.
  std::sort(out.begin(), out.end(), [](const timed_child& a, const timed_child& b) {
    return a.time.end != b.time.end ? a.time.end > b.time.end : a.time.begin < b.time.begin;
  });
  return out;
}

class walker {
 public:
  explicit walker(const trace_conventions& conventions) : conventions_(conventions) {}

  // Appends the action's stretches latest first (take() puts them in time order). `node` is the nearest
  // ancestor's node, so that a node's provisioning steps say which node they were for.
  void walk_back(const tree_node& n, const interval& time, std::size_t depth, std::string_view node) {
    if (auto own = conventions_.node_of(n); !own.empty()) node = nodes_.emplace_back(std::move(own));
    double t = time.end;
    for (const auto& child : children_latest_first(n, time, conventions_)) {
      if (child.time.end > t) continue;  // it overlaps a later link: off the path
      if (child.time.end < t) out_.push_back({&n, depth, {child.time.end, t}, node});
      walk_back(*child.node, child.time, depth + 1, node);
      t = child.time.begin;
    }
    if (time.begin < t) out_.push_back({&n, depth, {time.begin, t}, node});
  }

  std::vector<stretch> take() {
    std::reverse(out_.begin(), out_.end());
    return std::move(out_);
  }

 private:
  const trace_conventions& conventions_;
  std::deque<std::string> nodes_;  // stable storage for the node ids the stretches point at
  std::vector<stretch> out_;
};

bool foldable(const critical_link& l) {
  return l.status == "succeeded" && l.duration() < critical_path::negligible_seconds;
}

// Runs of two or more foldable links become one (critical_path.hpp).
std::vector<critical_link> fold_negligible(std::vector<critical_link> links) {
  std::vector<critical_link> out;
  for (std::size_t i = 0; i < links.size();) {
    std::size_t j = i;
    while (j < links.size() && foldable(links[j])) ++j;
    if (j - i < 2) {
      out.push_back(std::move(links[i]));
      ++i;
      continue;
    }
    critical_link folded = links[i];
    folded.end = links[j - 1].end;
    folded.folded = j - i;
    for (std::size_t k = i + 1; k < j; ++k)
      if (links[k].action_type != folded.action_type) folded.action_type.clear();
    out.push_back(std::move(folded));
    i = j;
  }
  return out;
}

}  // namespace

double critical_path::total() const {
  double sum = 0;
  for (const auto& l : links) sum += l.duration();
  return sum;
}

critical_path find_critical_path(const tree_node& job, const interval& job_interval,
                                 const trace_conventions& conventions) {
  walker w(conventions);
  w.walk_back(job, job_interval, 0, {});
  const auto stretches = w.take();
  critical_path path;
  const tree_node* last = nullptr;
  const double length = job_interval.length();
  for (const auto& s : stretches) {
    if (s.action == last && path.links.back().end == s.time.begin) {
      path.links.back().end = s.time.end;  // one action's own time, split by a zero-length child
    } else {
      path.links.push_back({std::string(s.action->type()), s.action->level_text(), std::string(s.node),
                            std::string(s.action->outcome()), s.depth, s.time.begin, s.time.end, 0});
    }
    last = s.action;
  }
  path.links = fold_negligible(std::move(path.links));
  for (auto& l : path.links) l.share = length > 0 ? l.duration() / length : 0;
  return path;
}

}  // namespace ferry::tracing
