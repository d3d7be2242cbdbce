#include "tracing/last_trace.hpp"

#include "tracing/error.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <optional>

namespace ferry::tracing {
namespace {

struct head {
  std::filesystem::path file;
  std::string task_uuid;
  std::string action_type;  // of the first message, "" when it is a plain message
  double timestamp = 0;
};

// The first message of a top-level trace file; nothing when the file is empty or its first line is no
// eliot message (a file being created right now, or not ferry's).
std::optional<head> read_head(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  boost::system::error_code ec;
  const auto value = boost::json::parse(line, ec);
  if (ec || !value.is_object()) return std::nullopt;
  const auto& o = value.get_object();
  const auto* uuid = o.if_contains("task_uuid");
  const auto* ts = o.if_contains("timestamp");
  if (!uuid || !uuid->is_string() || !ts || !ts->is_number()) return std::nullopt;
  head h{file, std::string(uuid->get_string()), {}, ts->to_number<double>()};
  if (const auto* type = o.if_contains("action_type"); type && type->is_string())
    h.action_type = std::string(type->get_string());
  return h;
}

// A node program's file belongs to the file whose stem it starts with, and read_traces brings it along.
bool is_node_file(const std::filesystem::path& p) { return p.filename().string().find(".node-") != std::string::npos; }

}  // namespace

result<last_trace> find_last_trace(const std::filesystem::path& dir, std::string_view skip_prefix, diagnostics& diag) {
  std::vector<head> heads;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto& p = entry.path();
    if (!entry.is_regular_file(ec) || p.extension() != ".jsonl" || is_node_file(p)) continue;
    auto h = read_head(p);
    if (h && !(h->action_type.starts_with(skip_prefix) && !skip_prefix.empty())) heads.push_back(std::move(*h));
  }
  if (heads.empty()) {
    diag.set(fmt::format("no command's trace in {} to read: run a command first, or name trace files", dir.string()));
    return make_error_code(errc::no_trace);
  }
  // Ties (one clock tick) go to the later name, which starts with the start time and the pid.
  const auto newest = std::max_element(heads.begin(), heads.end(), [](const head& a, const head& b) {
    return a.timestamp != b.timestamp ? a.timestamp < b.timestamp : a.file < b.file;
  });
  last_trace out{newest->file, newest->action_type, newest->timestamp, {newest->file}};
  std::vector<std::filesystem::path> others;
  for (const auto& h : heads)
    if (h.task_uuid == newest->task_uuid && h.file != newest->file) others.push_back(h.file);
  std::sort(others.begin(), others.end());
  out.files.insert(out.files.end(), others.begin(), others.end());
  return out;
}

}  // namespace ferry::tracing
