#include "tracing/tree_view.hpp"

#include "tracing/json_text.hpp"

#include <boost/json/serialize.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace ferry::tracing {
namespace {

// Fields every message has; the tree shows them in the node's title instead of as children.
const std::unordered_set<std::string_view> structural = {"task_uuid", "task_level", "timestamp", "action_type",
                                                         "action_status", "message_type"};

std::string level_text(const boost::json::object& fields) {
  std::string out;
  for (const auto& part : fields.at("task_level").get_array()) out += fmt::format("/{}", part.get_int64());
  return out;
}

std::string time_text(double ts) {
  const auto secs = static_cast<std::time_t>(ts);
  const auto ms = static_cast<int>((ts - static_cast<double>(secs)) * 1000.0);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:03}Z", fmt::gmtime(secs), ms);
}

std::string value_text(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  return boost::json::serialize(v);
}

class renderer {
 public:
  explicit renderer(const tree_view_options& options) : options_(options) {}

  void task(const task_tree& t) {
    out_ += t.uuid;
    if (!t.complete()) out_ += "  (incomplete)";
    out_ += '\n';
    const auto tops = t.tops();
    for (std::size_t i = 0; i < tops.size(); ++i) node(*tops[i], "", i + 1 == tops.size());
  }

  std::string take() { return std::move(out_); }

 private:
  std::string status_text(std::string_view status) const {
    if (!options_.color) return std::string(status);
    const char* code = status == "succeeded" ? "32" : status == "failed" ? "31" : status == "cancelled" ? "90" : "33";
    return fmt::format("\x1b[{}m{}\x1b[0m", code, status);
  }

  void line(const std::string& prefix, bool last, std::string_view text) {
    out_ += prefix;
    out_ += last ? "└── " : "├── ";
    out_ += text;
    out_ += '\n';
  }

  void fields(const boost::json::object& f, const std::string& prefix, bool last_group) {
    std::vector<std::pair<std::string_view, const boost::json::value*>> shown;
    for (const auto& [k, v] : f)
      if (!structural.contains(k)) shown.emplace_back(k, &v);
    for (std::size_t i = 0; i < shown.size(); ++i)
      line(prefix, last_group && i + 1 == shown.size(), fmt::format("{}: {}", shown[i].first, value_text(*shown[i].second)));
  }

  void node(const tree_node& n, const std::string& prefix, bool last) {
    const std::string inner = prefix + (last ? "    " : "│   ");
    if (!n.is_action()) {
      line(prefix, last, fmt::format("{}{} {}", n.type(), level_text(n.message->fields), time_text(n.message->timestamp)));
      fields(n.message->fields, inner, true);
      return;
    }
    action(n, prefix, last, inner);
  }

  void action(const tree_node& n, const std::string& prefix, bool last, const std::string& inner) {
    std::string title;
    if (n.start) {
      title = fmt::format("{}{} ⇒ {} {}", n.type(), level_text(n.start->fields), status_text("started"),
                          time_text(n.start->timestamp));
      if (auto d = n.duration()) title += fmt::format(" ⧖ {:.3f}s", *d);
    } else {
      title = fmt::format("{} (start not in these files)", n.type().empty() ? "<unknown action>" : n.type());
    }
    line(prefix, last, title);
    const bool has_end = n.end != nullptr;
    if (n.start) fields(n.start->fields, inner, n.children.empty() && !has_end);
    const auto items = children_to_draw(n);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const bool last_item = i + 1 == items.size() && !has_end;
      if (items[i].child)
        node(*items[i].child, inner, last_item);
      else
        line(inner, last_item, items[i].fold);
    }
    if (has_end) {
      line(inner, true, fmt::format("{}{} ⇒ {} {}", n.type(), level_text(n.end->fields), status_text(n.outcome()),
                                    time_text(n.end->timestamp)));
      fields(n.end->fields, inner + "    ", true);
    } else if (n.start) {
      line(inner, true, "(no end message: incomplete)");
    }
  }

  // A child drawn whole, or the line that stands for folded siblings (tree_view.hpp).
  struct item {
    const tree_node* child = nullptr;
    std::string fold;
  };

  static std::string_view ending(const tree_node& n) { return n.start && n.end ? n.outcome() : "incomplete"; }

  std::vector<item> children_to_draw(const tree_node& n) const {
    std::unordered_set<const tree_node*> hidden;
    std::unordered_map<const tree_node*, std::string> fold_at;  // the last sibling drawn -> the fold line after it
    if (!options_.all) {
      std::map<std::string_view, std::vector<const tree_node*>> alike;
      for (const auto& [_, child] : n.children)
        if (child->is_action() && !child->type().empty()) alike[child->type()].push_back(child.get());
      for (const auto& [type, members] : alike)
        if (members.size() >= options_.shown_alike + 3) fold(type, members, hidden, fold_at);
    }
    std::vector<item> out;
    for (const auto& [_, child] : n.children) {
      if (!hidden.contains(child.get())) out.push_back({child.get(), {}});
      if (auto it = fold_at.find(child.get()); it != fold_at.end()) out.push_back({nullptr, std::move(it->second)});
    }
    return out;
  }

  void fold(std::string_view type, const std::vector<const tree_node*>& members,
            std::unordered_set<const tree_node*>& hidden,
            std::unordered_map<const tree_node*, std::string>& fold_at) const {
    std::map<std::string_view, std::size_t> endings;  // of the hidden ones
    std::unordered_set<std::string_view> drawn_endings;
    const tree_node* last_drawn = nullptr;
    std::size_t hidden_count = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto e = ending(*members[i]);
      const bool must_show = e != "succeeded" && !drawn_endings.contains(e);
      if (i < options_.shown_alike || must_show) {
        drawn_endings.insert(e);
        last_drawn = members[i];
        continue;
      }
      hidden.insert(members[i]);
      ++endings[e];
      ++hidden_count;
    }
    if (hidden_count == 0) return;
    std::string how;
    for (const auto& [e, count] : endings) how += fmt::format("{}{} {}", how.empty() ? "" : ", ", count, e);
    fold_at[last_drawn] = fmt::format("… {} more {} like these: {} (--all shows every one)", hidden_count, type, how);
  }

  const tree_view_options& options_;
  std::string out_;
};

}  // namespace

std::string render_tree(const std::vector<task_tree>& tasks, const tree_view_options& options) {
  renderer r(options);
  std::string out;
  for (const auto& t : tasks) {
    r.task(t);
    out += r.take();
    out += '\n';
  }
  return out;
}

}  // namespace ferry::tracing
