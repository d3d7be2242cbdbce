#include "tracing/html_view.hpp"

#include "tracing/lanes.hpp"
#include "tracing/stats_view.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>

namespace ferry::tracing {
namespace {

namespace json = boost::json;

// The page: CSS, markup and the script that draws everything from the data put in place of @FERRY_DATA@.
constexpr std::string_view page =
#include "tracing/html_view_page.inc"
    ;

// A cancellation (tree_node::outcome) is not a failure: it has its own colour.
enum class bar_status { succeeded = 0, failed = 1, incomplete = 2, cancelled = 3 };

struct bar {
  const tree_node* action;
  std::size_t group;
  interval time;
  bar_status status;
  std::string_view task_uuid;
  std::size_t row = 0;
};

// Each process (file) and node is a group of rows; actions inherit their node from the nearest ancestor
// that names one, so a node's provisioning and its tasks' steps share its rows.
class bar_collector {
 public:
  explicit bar_collector(const trace_conventions& conventions) : conventions_(conventions) {}

  void task(const task_tree& t) {
    const auto whole = extent(*t.root);
    visit(t, *t.root, t.root->is_action() ? action_interval(*t.root, whole) : whole, "");
  }

  std::vector<bar>& bars() { return bars_; }
  const std::vector<std::pair<std::size_t, std::string>>& groups() const { return groups_; }

 private:
  void visit(const task_tree& t, const tree_node& n, const interval& time, std::string node) {
    if (!n.is_action()) return;
    if (auto own = conventions_.node_of(n); !own.empty()) node = std::move(own);
    const auto* first = n.start ? n.start : n.end;
    if (first) {  // else a level none of whose messages are in these files: only its children are drawn
      const auto outcome = n.outcome();
      const auto status = !n.start || !n.end       ? bar_status::incomplete
                          : outcome == "failed"    ? bar_status::failed
                          : outcome == "cancelled" ? bar_status::cancelled
                                                   : bar_status::succeeded;
      bars_.push_back({&n, group_of(first->file, node), time, status, t.uuid});
    }
    for (const auto& [_, child] : n.children)
      if (child->is_action()) visit(t, *child, action_interval(*child, time), node);
  }

  std::size_t group_of(std::size_t file, const std::string& node) {
    auto [it, inserted] = index_.try_emplace({file, node}, groups_.size());
    if (inserted) groups_.emplace_back(file, node);
    return it->second;
  }

  const trace_conventions& conventions_;
  std::vector<bar> bars_;
  std::vector<std::pair<std::size_t, std::string>> groups_;
  std::map<std::pair<std::size_t, std::string>, std::size_t> index_;
};

// Rows within each group: a lane per set of properly nested actions, a row per nesting depth on a lane.
std::vector<std::size_t> assign_rows(std::vector<bar>& bars, std::size_t group_count) {
  std::sort(bars.begin(), bars.end(), [](const bar& a, const bar& b) {
    return a.time.begin != b.time.begin ? a.time.begin < b.time.begin : a.time.end > b.time.end;
  });
  std::vector<lanes> group_lanes(group_count);
  std::vector<std::vector<std::size_t>> depths(group_count);  // per group, per lane: rows it needs
  std::vector<lane_place> places;
  places.reserve(bars.size());
  for (const auto& b : bars) {
    const auto p = group_lanes[b.group].place(b.time.begin, b.time.end);
    auto& d = depths[b.group];
    if (d.size() <= p.lane) d.resize(p.lane + 1, 0);
    d[p.lane] = std::max(d[p.lane], p.depth + 1);
    places.push_back(p);
  }
  std::vector<std::vector<std::size_t>> offsets(group_count);
  std::vector<std::size_t> rows(group_count, 0);
  for (std::size_t g = 0; g < group_count; ++g)
    for (auto d : depths[g]) {
      offsets[g].push_back(rows[g]);
      rows[g] += d;
    }
  for (std::size_t i = 0; i < bars.size(); ++i) bars[i].row = offsets[bars[i].group][places[i].lane] + places[i].depth;
  return rows;
}

bool structural(std::string_view key) {
  return key == "task_uuid" || key == "task_level" || key == "timestamp" || key == "action_type" ||
         key == "action_status";
}

json::object fields_of(const tree_node& n) {
  json::object out;
  for (const auto* m : {n.start, n.end})
    if (m)
      for (const auto& [k, v] : m->fields)
        if (!structural(k)) out[k] = v;
  return out;
}

class data_builder {
 public:
  data_builder(const trace_set& traces, const trace_stats& stats) : traces_(traces), stats_(stats) {}

  json::object build(std::vector<bar>& bars, const std::vector<std::pair<std::size_t, std::string>>& groups) {
    // Groups in file order, a file's rows without a node first.
    std::vector<std::size_t> order(groups.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return groups[a] < groups[b]; });
    std::vector<std::size_t> rank(groups.size());
    for (std::size_t i = 0; i < order.size(); ++i) rank[order[i]] = i;
    for (auto& b : bars) b.group = rank[b.group];
    const auto rows = assign_rows(bars, groups.size());

    t0_ = origin(bars);
    json::array group_list;
    for (std::size_t i = 0; i < order.size(); ++i)
      group_list.push_back({{"file", groups[order[i]].first}, {"node", groups[order[i]].second}, {"rows", rows[i]}});
    json::object data{{"t0", t0_}, {"files", files()}, {"groups", std::move(group_list)}};
    spans(bars, data);
    data["nodes"] = node_counts();
    data["pending"] = json::value_from(stats_.pending);
    data["stats"] = stats_to_json(stats_);
    return data;
  }

 private:
  double origin(const std::vector<bar>& bars) const {
    double t = std::numeric_limits<double>::infinity();
    for (const auto& b : bars) t = std::min(t, b.time.begin);
    for (const auto& m : traces_.messages) t = std::min(t, m.timestamp);
    return std::isfinite(t) ? t : 0;
  }

  json::array files() const {
    json::array out;
    for (const auto& f : traces_.files) out.push_back(json::string(f.string()));
    return out;
  }

  // Bars as compact rows [group, row, begin, end, status, type] (times from t0), details beside them.
  void spans(const std::vector<bar>& bars, json::object& data) {
    json::array types, rows, details;
    std::map<std::string_view, std::size_t> type_index;
    for (const auto& b : bars) {
      const auto type = b.action->type();
      auto [it, inserted] = type_index.try_emplace(type, types.size());
      if (inserted) types.push_back(json::string(type));
      rows.push_back({b.group, b.row, b.time.begin - t0_, b.time.end - t0_, static_cast<int>(b.status), it->second});
      json::object d{{"uuid", b.task_uuid}, {"level", b.action->level_text()}, {"status", b.action->outcome()},
                     {"fields", fields_of(*b.action)}};
      if (!b.action->start) d["note"] = "start message not in these files";
      if (!b.action->end) d["note"] = "no end message: incomplete";
      details.push_back(std::move(d));
    }
    data["types"] = std::move(types);
    data["spans"] = std::move(rows);
    data["details"] = std::move(details);
  }

  json::array node_counts() const {
    std::vector<const node_usage*> usages;
    for (const auto& j : stats_.jobs)
      for (const auto& n : j.nodes) usages.push_back(&n);
    json::array out;
    for (const auto& c : nodes_over_time(usages)) out.push_back({c.time - t0_, c.provisioned, c.busy});
    return out;
  }

  const trace_set& traces_;
  const trace_stats& stats_;
  double t0_ = 0;
};

// JSON inside <script> must not close it: every '<' (only ever inside strings) becomes \u003c.
std::string script_safe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (char c : json_text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string render_html(const trace_set& traces, const std::vector<task_tree>& tasks, const trace_stats& stats,
                        const trace_conventions& conventions) {
  bar_collector collector(conventions);
  for (const auto& t : tasks) collector.task(t);
  const auto data = data_builder(traces, stats).build(collector.bars(), collector.groups());
  constexpr std::string_view marker = "@FERRY_DATA@";
  const auto at = page.find(marker);
  std::string out;
  out += page.substr(0, at);
  out += script_safe(json::serialize(data));
  out += page.substr(at + marker.size());
  return out;
}

}  // namespace ferry::tracing
