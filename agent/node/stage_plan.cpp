#include "agent/node/stage_plan.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/plan_reader.hpp"
#include "agent/node/tenant_user.hpp"

namespace ferry::agent::node {

namespace json = boost::json;
using namespace plan_reading;

std::string stage_lines(const stage_request& r) {
  json::object header{{"task_id", r.task_id},     {"source", r.source},
                      {"node_dir", r.node_dir},   {"window", r.window},
                      {"limits", limits_json(r.limits)}, {"objects", r.objects.size()}};
  if (!r.tenant.empty()) header["tenant"] = r.tenant;
  std::string out = json::serialize(json::object{{"stage", std::move(header)}});
  out += '\n';
  for (const auto& o : r.objects) {
    out += json::serialize(
        json::object{{"object", json::object{{"path", o.path}, {"url", o.url}, {"size", o.size}, {"etag", o.etag}}}});
    out += '\n';
  }
  return out;
}

namespace {

// The one object under `key` that a line holds.
result<const json::object*> line_object(const json::value& doc, std::string_view key, diagnostics& diag) {
  const auto* top = object_of(doc);
  const auto* inner = top && top->size() == 1 ? top->if_contains(key) : nullptr;
  if (!inner || !object_of(*inner)) return bad(diag, fmt::format("a staging plan line is not {{\"{}\":{{...}}}}", key));
  return object_of(*inner);
}

}  // namespace

result<std::pair<stage_request, std::size_t>> parse_stage_header(std::string_view line, diagnostics& diag) {
  json::error_code jec;
  const auto doc = json::parse(line, jec);
  if (jec) return bad(diag, fmt::format("the staging plan's header is not JSON: {}", jec.message()));
  auto o = line_object(doc, "stage", diag);
  if (!o) return o.error();
  reader r{**o, "staging", diag, {}};
  stage_request out;
  out.task_id = r.text("task_id");
  out.source = r.text("source");
  out.node_dir = r.text("node_dir");
  out.window = r.number_or("window", 0);
  const auto count = r.number("objects");
  if ((*o)->contains("tenant")) out.tenant = r.text("tenant");
  if (r.ec) return r.ec;
  if (!out.tenant.empty() && !tenant_user_ok(out.tenant))
    return bad(diag, fmt::format("the staging plan's tenant '{}' is not a tenant's user name", out.tenant.substr(0, 64)));
  if (out.node_dir.empty() || out.node_dir.front() != '/' || !one_line(out.node_dir))
    return bad(diag, fmt::format("the staging directory '{}' is not an absolute path on one line", out.node_dir));
  auto limits = read_limits((*o)->if_contains("limits"), diag);
  if (!limits) return limits.error();
  out.limits = *limits;
  return std::pair{std::move(out), static_cast<std::size_t>(count)};
}

result<stage_object> parse_stage_object(std::string_view line, std::size_t index, diagnostics& diag) {
  json::error_code jec;
  const auto doc = json::parse(line, jec);
  if (jec) return bad(diag, fmt::format("the staging plan's object {} is not JSON: {}", index + 1, jec.message()));
  auto o = line_object(doc, "object", diag);
  if (!o) return o.error();
  const auto where = fmt::format("object {}", index + 1);
  reader r{**o, where, diag, {}};
  stage_object out;
  out.path = r.text("path");
  out.url = r.text("url");
  out.size = r.number("size");
  out.etag = r.text("etag");
  if (r.ec) return r.ec;
  diagnostics why;
  auto split = split_entry_name(out.path, "the staging", why);
  if (!split || split->directory)
    return bad(diag, fmt::format("the staged object {} cannot be a file under the node directory: {}",
                                 printable_name(out.path), split ? "it names a directory" : why.message));
  const auto top = split->dirs.empty() ? split->leaf : split->dirs.front();
  if (top.starts_with(".ferry-stage"))
    return bad(diag, fmt::format("the staged object {} would fall among the staging's own files",
                                 printable_name(out.path)));
  if (out.url.empty() || !one_line(out.url) || !one_line(out.etag))
    return bad(diag, fmt::format("the staged object {} has an empty URL or a line break", printable_name(out.path)));
  return out;
}

}  // namespace ferry::agent::node
