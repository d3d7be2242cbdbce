#include "tracing/chrome_view.hpp"

#include "tracing/lanes.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ferry::tracing {
namespace {

struct span {
  const tree_node* node;
  std::size_t file;
  double begin;
  double end;
  bool incomplete;
};

void collect(const tree_node& n, double last_time, std::vector<span>& spans, std::vector<const tree_node*>& marks) {
  if (!n.is_action()) {
    marks.push_back(&n);
    return;
  }
  if (n.start) {
    const double end = n.end ? n.end->timestamp : last_time;
    spans.push_back({&n, n.start->file, n.start->timestamp, end, n.end == nullptr});
  }
  for (const auto& [_, child] : n.children) collect(*child, last_time, spans, marks);
}

boost::json::object args_of(const tree_node& n) {
  boost::json::object args;
  for (const auto* m : {n.start, n.end})
    if (m)
      for (const auto& [k, v] : m->fields)
        if (k != "task_level" && k != "timestamp" && k != "action_type") args[k] = v;
  return args;
}

std::int64_t id(std::size_t index) { return static_cast<std::int64_t>(index) + 1; }

std::int64_t micros(double seconds) { return static_cast<std::int64_t>(std::llround(seconds * 1e6)); }

}  // namespace

boost::json::value render_chrome(const trace_set& traces, const std::vector<task_tree>& tasks) {
  const double last_time = traces.messages.empty() ? 0.0 : traces.messages.back().timestamp;
  std::vector<span> spans;
  std::vector<const tree_node*> marks;
  for (const auto& t : tasks) collect(*t.root, last_time, spans, marks);
  // Outer actions first, so that each lands before anything it contains.
  std::sort(spans.begin(), spans.end(), [](const span& a, const span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });

  boost::json::array events;
  for (std::size_t f = 0; f < traces.files.size(); ++f)
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", id(f)},
                      {"args", {{"name", traces.files[f].filename().string()}}}});
  std::map<std::size_t, lanes> per_file;
  std::map<std::pair<std::size_t, std::size_t>, std::string_view> lane_names;  // (file, lane) -> its first action
  for (const auto& s : spans) {
    auto args = args_of(*s.node);
    if (s.incomplete) args["incomplete"] = true;
    const auto lane = per_file[s.file].place(s.begin, s.end).lane;
    lane_names.try_emplace({s.file, lane}, s.node->type());
    events.push_back({{"ph", "X"}, {"name", s.node->type()}, {"cat", s.node->outcome()}, {"pid", id(s.file)},
                      {"tid", id(lane)}, {"ts", micros(s.begin)},
                      {"dur", std::max<std::int64_t>(0, micros(s.end) - micros(s.begin))}, {"args", std::move(args)}});
  }
  // Perfetto labels each track by its thread's name: the lane's number and the action that opened it.
  for (const auto* m : marks) lane_names.try_emplace({m->message->file, 0}, "messages");
  for (const auto& [at, first] : lane_names) {
    const auto& [file, lane] = at;
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", id(file)}, {"tid", id(lane)},
                      {"args", {{"name", fmt::format("lane {}: {}", lane + 1, first)}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", id(file)}, {"tid", id(lane)},
                      {"args", {{"sort_index", id(lane)}}}});
  }
  for (const auto* m : marks) {
    boost::json::object args;
    for (const auto& [k, v] : m->message->fields)
      if (k != "timestamp" && k != "message_type") args[k] = v;
    events.push_back({{"ph", "i"}, {"s", "t"}, {"name", m->type()}, {"pid", id(m->message->file)}, {"tid", 1},
                      {"ts", micros(m->message->timestamp)}, {"args", std::move(args)}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace ferry::tracing
