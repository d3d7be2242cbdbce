#include "tracing/trace_file.hpp"

#include "tracing/error.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>

namespace ferry::tracing {
namespace {

// Why a parsed line is not an eliot message, or empty when it is one.
std::string check_message(const boost::json::object& o) {
  const auto* uuid = o.if_contains("task_uuid");
  if (!uuid || !uuid->is_string()) return "no task_uuid";
  const auto* level = o.if_contains("task_level");
  if (!level || !level->is_array() || level->get_array().empty()) return "no task_level";
  for (const auto& part : level->get_array())
    if (!part.is_int64() || part.get_int64() <= 0) return "task_level holds a value that is not a positive integer";
  const auto* ts = o.if_contains("timestamp");
  if (!ts || !ts->is_number()) return "no numeric timestamp";
  // Seconds since 1970 up to the year 10000: the views do integer arithmetic in microseconds on these,
  // which a value such as 1e300 or a negative one would overflow.
  const double seconds = ts->to_number<double>();
  if (!(seconds >= 0 && seconds < 253402300800.0)) return "timestamp out of range";
  if (!o.contains("action_type") && !o.contains("message_type")) return "neither action_type nor message_type";
  if (o.contains("action_type") && !o.contains("action_status")) return "action_type without action_status";
  return {};
}

void read_one(std::size_t file_index, const std::filesystem::path& path, std::istream& in, trace_set& out) {
  std::string text;
  std::size_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    boost::system::error_code ec;
    auto value = boost::json::parse(text, ec);
    std::string why;
    if (ec)
      why = "not JSON (" + ec.message() + ")";
    else if (!value.is_object())
      why = "not a JSON object";
    else
      why = check_message(value.get_object());
    if (!why.empty()) {
      out.problems.push_back(fmt::format("{}:{}: {}", path.string(), line_no, why));
      continue;
    }
    trace_message m{std::move(value.get_object()), file_index, line_no, 0};
    m.timestamp = m.fields.at("timestamp").to_number<double>();
    out.messages.push_back(std::move(m));
  }
}

std::vector<std::filesystem::path> expand(const std::vector<std::filesystem::path>& paths) {
  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
      files.push_back(p);
      // A trace file brings the files its remote processes wrote beside it (<stem>.node-*.jsonl), so one
      // run's file is one run's whole trace.
      std::vector<std::filesystem::path> nodes;
      const auto prefix = p.stem().string() + ".node-";
      const auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
      for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const auto name = entry.path().filename().string();
        if (name.starts_with(prefix) && entry.path().extension() == ".jsonl") nodes.push_back(entry.path());
      }
      std::sort(nodes.begin(), nodes.end());
      for (auto& n : nodes)
        if (std::find(paths.begin(), paths.end(), n) == paths.end()) files.push_back(std::move(n));
      continue;
    }
    std::vector<std::filesystem::path> inside;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(p, ec))
      if (entry.is_regular_file() && entry.path().extension() == ".jsonl") inside.push_back(entry.path());
    std::sort(inside.begin(), inside.end());
    files.insert(files.end(), inside.begin(), inside.end());
  }
  return files;
}

}  // namespace

result<trace_set> read_traces(const std::vector<std::filesystem::path>& paths, diagnostics& diag) {
  trace_set out;
  out.files = expand(paths);
  for (std::size_t i = 0; i < out.files.size(); ++i) {
    std::ifstream in(out.files[i], std::ios::binary);
    if (!in) {
      diag.set(fmt::format("cannot read trace file {}", out.files[i].string()));
      return make_error_code(errc::unreadable_file);
    }
    read_one(i, out.files[i], in, out);
  }
  // Several processes wrote these files; time orders their messages into one history.
  std::stable_sort(out.messages.begin(), out.messages.end(),
                   [](const trace_message& a, const trace_message& b) { return a.timestamp < b.timestamp; });
  return out;
}

}  // namespace ferry::tracing
