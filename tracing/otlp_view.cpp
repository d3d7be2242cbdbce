#include "tracing/otlp_view.hpp"

#include "tracing/action_types.hpp"
#include "tracing/json_text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace ferry::tracing {
namespace {

namespace json = boost::json;

// ---- ids ----

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// SplitMix64's finalizer: FNV-1a alone leaves inputs that differ in their last byte (levels /3/2 and /3/3)
// with hashes that differ little.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

// The 32 hex digits of a canonical UUID (8-4-4-4-12, either case), lowercased; empty when the text is not
// one, or is the nil UUID (an all-zero trace id is invalid in OTLP).
std::string uuid_hex(std::string_view text) {
  if (text.size() != 36) return {};
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return {};
      continue;
    }
    if (!std::isxdigit(c)) return {};
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out.find_first_not_of('0') == std::string::npos ? std::string() : out;
}

// eliot's serialize_task_id of the action at `level`: "T@/" for a task's root, "T@/3/2" below it.
std::string eliot_task_id(std::string_view uuid, const std::vector<std::uint32_t>& level) {
  std::string out(uuid);
  out += '@';
  if (level.empty()) out += '/';
  for (const auto part : level) (out += '/') += std::to_string(part);
  return out;
}

// ---- values ----

bool starts_with_ci(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
  return true;
}

bool is_secret_name(std::string_view key) { return is_secret_key(key) || starts_with_ci(key, "x-amz-"); }

std::string scrubbed(std::string_view s) {
  return s.find("X-Amz-") == std::string_view::npos ? std::string(s) : redact_text(s);
}

// A URL without its user info, query and fragment: what url.full may hold when the query can be a
// presigned one.
std::string bare_url(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const auto authority = scheme_end + 3;
  const auto path = std::min(url.find('/', authority), url.size());
  const auto at = url.substr(authority, path - authority).rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, authority)) + std::string(url.substr(authority + at + 1));
}

// The fields with an OpenTelemetry semantic-convention name; the others become ferry.<field>.
constexpr std::array<std::pair<std::string_view, std::string_view>, 11> semantic_names = {{
    {"host", "server.address"},
    {"port", "server.port"},
    {"bucket", "aws.s3.bucket"},
    {"key", "aws.s3.key"},
    {"part", "aws.s3.part_number"},
    {"operation", "rpc.method"},
    {"exit_code", "process.exit.code"},
    {"pid", "process.pid"},
    {"user", "user.name"},
    {"region", "cloud.region"},
    {"url", "url.full"},
}};

std::string attribute_name(std::string_view field) {
  for (const auto& [f, name] : semantic_names)
    if (f == field) return std::string(name);
  return fmt::format("ferry.{}", field);
}

json::array key_values(const json::object& fields, std::size_t& dropped);

// An AnyValue; null becomes the empty one. Integers are decimal strings, as OTLP/JSON has int64.
json::object any_value(const json::value& v, std::size_t& dropped) {
  switch (v.kind()) {
    case json::kind::null: return {};
    case json::kind::bool_: return {{"boolValue", v.get_bool()}};
    case json::kind::int64: return {{"intValue", std::to_string(v.get_int64())}};
    case json::kind::uint64: {
      const auto u = v.get_uint64();
      // Beyond OTLP's signed 64 bits a number stays exact as text.
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return {{"stringValue", std::to_string(u)}};
      return {{"intValue", std::to_string(u)}};
    }
    case json::kind::double_: {
      const double d = v.get_double();
      if (std::isnan(d)) return {{"doubleValue", "NaN"}};  // proto3 JSON's names for what JSON lacks
      if (std::isinf(d)) return {{"doubleValue", d > 0 ? "Infinity" : "-Infinity"}};
      return {{"doubleValue", d}};
    }
    case json::kind::string: return {{"stringValue", scrubbed(v.get_string())}};
    case json::kind::array: {
      json::array values;
      for (const auto& item : v.get_array()) values.push_back(any_value(item, dropped));
      json::object array_value;
      if (!values.empty()) array_value["values"] = std::move(values);
      return {{"arrayValue", std::move(array_value)}};
    }
    case json::kind::object: {
      auto values = key_values(v.get_object(), dropped);
      json::object list;
      if (!values.empty()) list["values"] = std::move(values);
      return {{"kvlistValue", std::move(list)}};
    }
  }
  return {};
}

// Nested objects keep their keys, less the secret ones.
json::array key_values(const json::object& fields, std::size_t& dropped) {
  json::array out;
  for (const auto& [k, v] : fields) {
    if (is_secret_name(k)) {
      ++dropped;
      continue;
    }
    out.push_back(json::object{{"key", k}, {"value", any_value(v, dropped)}});
  }
  return out;
}

// eliot's own fields, which the span or event carries in its own way.
bool is_eliot_field(std::string_view key) {
  return key == "task_uuid" || key == "task_level" || key == "timestamp" || key == "action_type" ||
         key == "action_status" || key == "message_type";
}

struct attributes {
  json::array list;
  std::size_t dropped = 0;

  void add(std::string_view name, json::value value) {
    list.push_back(json::object{{"key", name}, {"value", std::move(value)}});
  }
  void add_fields(const json::object& fields) {
    for (const auto& [k, v] : fields) {
      if (is_eliot_field(k)) continue;
      if (is_secret_name(k)) {
        ++dropped;
        continue;
      }
      if (v.is_null()) continue;
      const auto name = attribute_name(k);
      if (name == "url.full" && v.is_string())
        add(name, json::object{{"stringValue", scrubbed(bare_url(v.get_string()))}});
      else
        add(name, any_value(v, dropped));
    }
  }
  void put_into(json::object& owner) {
    if (!list.empty()) owner["attributes"] = std::move(list);
    if (dropped > 0) owner["droppedAttributesCount"] = dropped;
  }
};

// ---- times ----

// Nanoseconds since 1970 as OTLP/JSON writes a fixed64: a decimal string. Rounded to the microsecond
// first, as eliot's float seconds hold no more; past the year 2554 (uint64 ns) it saturates.
std::string nanos(double seconds) {
  constexpr auto max_micros = std::numeric_limits<std::uint64_t>::max() / 1000;
  const double micros = std::round(seconds * 1e6);
  if (!(micros > 0)) return "0";
  if (micros >= static_cast<double>(max_micros)) return std::to_string(max_micros * 1000);
  return std::to_string(static_cast<std::uint64_t>(micros) * 1000);
}

// ---- spans ----

// Calls to another machine are CLIENT spans (3): an S3 request's attempt, an EC2 API call's attempt
// ("ec2:" and its Action), an SSH login, command or transfer. The rest are INTERNAL (1).
int span_kind(std::string_view type) {
  namespace at = action_types;
  for (const auto client : {at::s3::request, at::ssh::connect, at::ssh::exec, at::ssh::upload, at::ssh::download})
    if (type == client) return 3;
  const auto& prefix = at::ec2::request_prefix;
  if (type.starts_with(prefix) && type.size() > prefix.size() && std::isupper(static_cast<unsigned char>(type[prefix.size()])))
    return 3;
  return 1;
}

std::string_view text_of(const trace_message* m, std::string_view key) {
  const auto* v = m ? m->fields.if_contains(key) : nullptr;
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view{};
}

json::object event_of(const trace_message& m) {
  json::object event{{"timeUnixNano", nanos(m.timestamp)}, {"name", text_of(&m, "message_type")}};
  attributes attrs;
  attrs.add_fields(m.fields);
  attrs.put_into(event);
  return event;
}

struct span_source {
  std::string_view uuid;
  std::string trace_id;
  bool uuid_is_id = true;
  double last_time = 0;
};

// The span of an action node (start or end present); its direct messages become its events.
json::object span_of(const tree_node& n, const span_source& src, std::size_t& events) {
  const auto* first = n.start ? n.start : n.end;
  json::object span{{"traceId", src.trace_id}, {"spanId", otlp_span_id(src.uuid, n.level)}};
  if (!n.level.empty()) {
    const std::vector<std::uint32_t> parent(n.level.begin(), n.level.end() - 1);
    span["parentSpanId"] = otlp_span_id(src.uuid, parent);
  }
  span["name"] = n.type();
  span["kind"] = span_kind(n.type());
  span["startTimeUnixNano"] = nanos(first->timestamp);
  span["endTimeUnixNano"] = nanos(n.end ? n.end->timestamp : std::max(src.last_time, first->timestamp));

  json::object merged;  // the end's fields over the start's, as the other views show them
  for (const auto* m : {n.start, n.end})
    if (m)
      for (const auto& [k, v] : m->fields) merged[k] = v;
  const bool cancelled = n.outcome() == "cancelled";
  const bool failed = n.outcome() == "failed";
  if (failed || cancelled) {
    merged.erase("exception");
    merged.erase("reason");
  }
  attributes attrs;
  attrs.add("ferry.task_level", json::object{{"stringValue", n.level_text()}});
  if (!src.uuid_is_id) attrs.add("ferry.task_uuid", json::object{{"stringValue", scrubbed(src.uuid)}});
  if (!n.start || !n.end) attrs.add("ferry.incomplete", json::object{{"boolValue", true}});
  if (cancelled) attrs.add("ferry.cancelled", json::object{{"boolValue", true}});
  attrs.add_fields(merged);
  attrs.put_into(span);

  json::array span_events;
  for (const auto& [_, child] : n.children)
    if (child->message) span_events.push_back(event_of(*child->message));
  json::object status;
  if (n.status() == "succeeded") status["code"] = 1;
  if (failed) {
    const auto exception = scrubbed(text_of(n.end, "exception"));
    const auto reason = scrubbed(text_of(n.end, "reason"));
    status["code"] = 2;
    if (!reason.empty() || !exception.empty()) status["message"] = reason.empty() ? exception : reason;
    attributes e;
    if (!exception.empty()) e.add("exception.type", json::object{{"stringValue", exception}});
    if (!reason.empty()) e.add("exception.message", json::object{{"stringValue", reason}});
    json::object event{{"timeUnixNano", nanos(n.end->timestamp)}, {"name", "exception"}};
    e.put_into(event);
    span_events.push_back(std::move(event));
  }
  events += span_events.size();
  if (!span_events.empty()) span["events"] = std::move(span_events);
  span["status"] = std::move(status);
  return span;
}

// ---- resources ----

struct file_process {
  std::string service = "ferry";
  std::string version;
  std::int64_t pid = 0;
};

std::vector<file_process> processes_of(const trace_set& traces) {
  std::vector<file_process> out(traces.files.size());
  std::vector<bool> ferry_root(out.size()), remote_task(out.size());
  for (const auto& m : traces.messages) {
    auto& p = out[m.file];
    if (const auto v = text_of(&m, "ferry_version"); !v.empty() && !ferry_root[m.file]) {
      ferry_root[m.file] = true;
      p.version = v;
      if (const auto* pid = m.fields.if_contains("pid"); pid && pid->is_int64()) p.pid = pid->get_int64();
    }
    // What Python's eliot (Action.continue_task) names the action that continues a task in its process.
    if (text_of(&m, "action_type") == "eliot:remote_task") remote_task[m.file] = true;
  }
  for (std::size_t f = 0; f < out.size(); ++f) {
    const auto name = traces.files[f].filename().string();
    if (name.find(".node-") != std::string::npos && name.ends_with(".jsonl"))
      out[f].service = "ferry-node";
    else if (!ferry_root[f] && remote_task[f])
      out[f].service = "python";
  }
  return out;
}

std::string resource_text(const trace_set& traces, const std::vector<file_process>& processes, std::size_t file) {
  const auto& p = processes[file];
  attributes attrs;
  attrs.add("service.name", json::object{{"stringValue", p.service}});
  if (!p.version.empty()) attrs.add("service.version", json::object{{"stringValue", p.version}});
  if (p.pid > 0) attrs.add("process.pid", json::object{{"intValue", std::to_string(p.pid)}});
  attrs.add("ferry.trace_file", json::object{{"stringValue", traces.files[file].filename().string()}});
  json::object resource;
  attrs.put_into(resource);
  return json::serialize(resource);
}

// ---- lines ----

// Spans of one task gathered into lines: each line whole JSON text, at most max_bytes long where a
// span allows.
class line_writer {
 public:
  line_writer(std::vector<std::string> resources, std::size_t max_bytes, std::vector<std::string>& lines)
      : resources_(std::move(resources)), max_bytes_(max_bytes), lines_(lines) {}

  void add(std::size_t file, std::string span) {
    const auto more = span.size() + 1 + (by_file_.contains(file) ? 0 : resource_cost(file));
    if (!by_file_.empty() && bytes_ + more > max_bytes_) flush();
    bytes_ += span.size() + 1 + (by_file_.contains(file) ? 0 : resource_cost(file));
    by_file_[file].push_back(std::move(span));
  }

  void flush() {
    if (by_file_.empty()) return;
    std::string line = R"({"resourceSpans":[)";
    bool first_resource = true;
    for (auto& [file, spans] : by_file_) {
      if (!first_resource) line += ',';
      first_resource = false;
      (line += R"({"resource":)") += resources_[file];
      line += scope_open;
      for (std::size_t i = 0; i < spans.size(); ++i) (line += i ? "," : "") += spans[i];
      line += scope_close;
    }
    line += "]}";
    lines_.push_back(std::move(line));
    by_file_.clear();
    bytes_ = base_cost;
  }

 private:
  static constexpr std::string_view scope_open = R"(,"scopeSpans":[{"scope":{"name":"ferry"},"spans":[)";
  static constexpr std::string_view scope_close = "]}]}";
  static constexpr std::size_t base_cost = 20;  // {"resourceSpans":[ and ]}

  std::size_t resource_cost(std::size_t file) const {
    return resources_[file].size() + scope_open.size() + scope_close.size() + 13;
  }

  std::vector<std::string> resources_;
  std::size_t max_bytes_;
  std::vector<std::string>& lines_;
  std::map<std::size_t, std::vector<std::string>> by_file_;  // spans by the file (resource) they came from
  std::size_t bytes_ = base_cost;
};

void walk(const tree_node& n, const span_source& src, line_writer& out, otlp_export& result) {
  if (n.start || n.end) {
    out.add((n.start ? n.start : n.end)->file, json::serialize(span_of(n, src, result.events)));
    ++result.spans;
  }
  for (const auto& [_, child] : n.children) {
    if (!child->message)
      walk(*child, src, out, result);
    else if (!n.start && !n.end)
      ++result.left_out_messages;  // its action is not in these files: no span to hold it
  }
}

}  // namespace

std::string otlp_trace_id(std::string_view task_uuid) {
  if (auto hex = uuid_hex(task_uuid); !hex.empty()) return hex;
  const std::string text(task_uuid);
  auto high = mix(fnv1a("0:" + text));
  const auto low = mix(fnv1a("1:" + text));
  if (high == 0 && low == 0) high = 1;
  return hex64(high) + hex64(low);
}

std::string otlp_span_id(std::string_view task_uuid, const std::vector<std::uint32_t>& level) {
  const auto id = mix(fnv1a(eliot_task_id(task_uuid, level)));
  return hex64(id == 0 ? 1 : id);
}

otlp_export render_otlp(const trace_set& traces, const std::vector<task_tree>& tasks, const otlp_options& options) {
  otlp_export result;
  const auto processes = processes_of(traces);
  std::vector<std::string> resources;
  for (std::size_t f = 0; f < traces.files.size(); ++f) resources.push_back(resource_text(traces, processes, f));
  line_writer out(std::move(resources), options.max_line_bytes, result.lines);
  const double last_time = traces.messages.empty() ? 0.0 : traces.messages.back().timestamp;
  for (const auto& task : tasks) {
    span_source src{task.uuid, otlp_trace_id(task.uuid), !uuid_hex(task.uuid).empty(), last_time};
    if (task.root->message)
      ++result.left_out_messages;  // a task that is one message: no action to hold it
    else
      walk(*task.root, src, out, result);
    out.flush();  // a line holds one task's spans
  }
  return result;
}

}  // namespace ferry::tracing
