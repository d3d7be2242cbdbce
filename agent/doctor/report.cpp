#include "agent/doctor/report.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent::doctor {
namespace {

std::string_view mark(check_status s) {
  switch (s) {
    case check_status::passed: return "✓";
    case check_status::failed: return "✗";
    case check_status::skipped: return "—";
  }
  return "—";
}

std::size_t count(const std::vector<check_result>& checks, check_status s) {
  return static_cast<std::size_t>(
      std::count_if(checks.begin(), checks.end(), [s](const check_result& c) { return c.status == s; }));
}

std::string summary(const std::vector<check_result>& checks) {
  if (all_passed(checks)) return fmt::format("ferry doctor: all {} checks passed\n", checks.size());
  return fmt::format("ferry doctor: {} of {} checks passed, {} failed, {} skipped\n", count(checks, check_status::passed),
                     checks.size(), count(checks, check_status::failed), count(checks, check_status::skipped));
}

}  // namespace

std::string render_text(const std::vector<check_result>& checks) {
  std::size_t width = 0;
  for (const auto& c : checks) width = std::max(width, c.name.size());
  std::string out;
  for (const auto& c : checks) {
    out += fmt::format("{} {:<{}}  {}\n", mark(c.status), c.name, width, c.detail);
    if (c.status == check_status::failed && !c.fix.empty())
      out += fmt::format("  {:<{}}  fix: {}\n", "", width, c.fix);
  }
  out += summary(checks);
  return out;
}

std::string render_json(const std::vector<check_result>& checks) {
  boost::json::array list;
  for (const auto& c : checks) {
    boost::json::object o;
    o["name"] = c.name;
    o["status"] = to_string(c.status);
    o["ok"] = c.passed();
    o["detail"] = c.detail;
    if (c.fix.empty())
      o["fix"] = nullptr;
    else
      o["fix"] = c.fix;
    list.push_back(std::move(o));
  }
  boost::json::object doc;
  doc["ok"] = all_passed(checks);
  doc["checks"] = std::move(list);
  return boost::json::serialize(doc) + "\n";
}

bool all_passed(const std::vector<check_result>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const check_result& c) { return c.passed(); });
}

}  // namespace ferry::agent::doctor
