// `ferry trace otlp`'s rendering (tracing/otlp_view.hpp) on hand-written traces: ids, parent links across
// files, status, incomplete actions, secrets, the OTLP/JSON encoding of values, lines, and the same
// output read back by the independent decoder (protobufjs with the OTLP protos).
#include "tracing/otlp_view.hpp"

#include "support/temp_dir.hpp"

#include "otlp_decoder.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

namespace ferry::tracing {
namespace {

namespace json = boost::json;
using test::temp_dir;

constexpr std::string_view uuid = "8E5F5D6A-2C3B-4D1E-9F00-112233445566";

// Eliot lines of one task.
struct lines_of {
  std::string task = std::string(uuid);

  std::string start(std::string_view type, std::string_view level, double ts, std::string_view extra = "") const {
    return fmt::format(R"({{"task_uuid":"{}","task_level":[{}],"timestamp":{:.6f},"action_type":"{}","action_status":"started"{}}})",
                       task, level, ts, type, extra) + "\n";
  }
  std::string end(std::string_view type, std::string_view level, double ts, std::string_view status = "succeeded",
                  std::string_view extra = "") const {
    return fmt::format(R"({{"task_uuid":"{}","task_level":[{}],"timestamp":{:.6f},"action_type":"{}","action_status":"{}"{}}})",
                       task, level, ts, type, status, extra) + "\n";
  }
  std::string message(std::string_view type, std::string_view level, double ts, std::string_view extra = "") const {
    return fmt::format(R"({{"task_uuid":"{}","task_level":[{}],"timestamp":{:.6f},"message_type":"{}"{}}})", task,
                       level, ts, type, extra) + "\n";
  }
};

trace_set read(const std::vector<std::filesystem::path>& files) {
  diagnostics diag;
  auto set = read_traces(files, diag);
  EXPECT_TRUE(set) << diag.message;
  EXPECT_TRUE(set->problems.empty());
  return std::move(*set);
}

otlp_export render(const trace_set& set, const otlp_options& options = {}) {
  return render_otlp(set, build_task_trees(set), options);
}

// A span as exported, with its resource's service.name and trace file.
struct exported_span {
  json::object span;
  std::string service;
  std::string file;
};

std::string string_attribute(const json::object& owner, std::string_view key) {
  if (const auto* attrs = owner.if_contains("attributes"))
    for (const auto& a : attrs->as_array())
      if (a.at("key").as_string() == key) return std::string(a.at("value").at("stringValue").as_string());
  return {};
}

const json::value* attribute(const json::object& owner, std::string_view key) {
  if (const auto* attrs = owner.if_contains("attributes"))
    for (const auto& a : attrs->as_array())
      if (a.at("key").as_string() == key) return &a.at("value");
  return nullptr;
}

// Spans by name (each name once in these samples).
std::map<std::string, exported_span> spans_of(const otlp_export& out) {
  std::map<std::string, exported_span> spans;
  for (const auto& line : out.lines) {
    const auto request = json::parse(line).as_object();
    for (const auto& rs : request.at("resourceSpans").as_array()) {
      const auto& resource = rs.at("resource").as_object();
      for (const auto& ss : rs.at("scopeSpans").as_array())
        for (const auto& s : ss.at("spans").as_array())
          spans[std::string(s.at("name").as_string())] = {s.as_object(), string_attribute(resource, "service.name"),
                                                          string_attribute(resource, "ferry.trace_file")};
    }
  }
  return spans;
}

std::string id_of(const std::map<std::string, exported_span>& spans, const std::string& name) {
  const auto it = spans.find(name);
  return it == spans.end() ? "(no span " + name + ")" : std::string(it->second.span.at("spanId").as_string());
}

std::string parent_of(const std::map<std::string, exported_span>& spans, const std::string& name) {
  const auto it = spans.find(name);
  if (it == spans.end()) return "(no span " + name + ")";
  const auto* p = it->second.span.if_contains("parentSpanId");
  return p ? std::string(p->as_string()) : std::string();
}

bool is_hex(const std::string& s, std::size_t digits) {
  return s.size() == digits && s.find_first_not_of("0123456789abcdef") == std::string::npos &&
         s.find_first_not_of('0') != std::string::npos;
}

// A run on the workstation (ferry), its task on a node (the node program, the file beside ferry's) and a
// Python program the task started, which continues the task in a file of its own.
struct three_processes {
  temp_dir dir;
  std::filesystem::path ferry, node, python;

  three_processes() {
    const lines_of t;
    ferry = dir.write("run.jsonl", t.start("ferry:run", "1", 100.0, R"(,"ferry_version":"1.2.3","pid":42)") +
                                       t.start("ferry:agent:task", "2,1", 100.1, R"(,"node":"n1")") +
                                       t.end("ferry:agent:task", "2,4", 103.0, "succeeded", R"(,"exit_code":0)") +
                                       t.end("ferry:run", "3", 104.0, "succeeded", R"(,"exit_code":0)"));
    node = dir.write("run.node-n1-0.jsonl", t.start("ferry:node:materialise", "2,2,1", 100.2) +
                                                t.start("ferry:materialise:layer", "2,2,2,1", 100.3) +
                                                t.end("ferry:materialise:layer", "2,2,2,2", 100.4) +
                                                t.end("ferry:node:materialise", "2,2,3", 100.5));
    python = dir.write("child-77.jsonl", t.start("eliot:remote_task", "2,3,1", 101.0) +
                                             t.start("user:work", "2,3,2,1", 101.1) +
                                             t.message("user:hello", "2,3,2,2", 101.2, R"(,"n":1)") +
                                             t.end("user:work", "2,3,2,3", 101.3) +
                                             t.end("eliot:remote_task", "2,3,3", 101.4));
  }
};

TEST(otlp_view, ids_come_from_the_task_and_the_level_and_are_never_zero) {
  EXPECT_EQ(otlp_trace_id(uuid), "8e5f5d6a2c3b4d1e9f00112233445566");
  for (const auto* other : {"T", "not-a-uuid", "00000000-0000-0000-0000-000000000000", ""}) {
    const auto id = otlp_trace_id(other);
    EXPECT_TRUE(is_hex(id, 32)) << other << " -> " << id;
    EXPECT_EQ(id, otlp_trace_id(other));
  }
  EXPECT_NE(otlp_trace_id("T"), otlp_trace_id("U"));
  // Every level of a wide, deep task has an id of its own.
  std::set<std::string> ids;
  std::size_t levels = 0;
  for (std::uint32_t a = 1; a <= 300; ++a)
    for (std::uint32_t b = 0; b <= 30; ++b) {
      const auto level = b == 0 ? std::vector<std::uint32_t>{a} : std::vector<std::uint32_t>{a, b};
      const auto id = otlp_span_id(uuid, level);
      EXPECT_TRUE(is_hex(id, 16)) << id;
      ids.insert(id);
      ++levels;
    }
  ids.insert(otlp_span_id(uuid, {}));
  EXPECT_EQ(ids.size(), levels + 1);
  EXPECT_NE(otlp_span_id("T", {3, 2}), otlp_span_id("U", {3, 2}));

  // The same action gets the same ids whichever files are exported with it, in whatever order.
  three_processes p;
  const auto together = spans_of(render(read({p.ferry, p.python})));
  const auto reversed = spans_of(render(read({p.python, p.ferry})));
  const auto alone = spans_of(render(read({p.python})));
  ASSERT_EQ(together.size(), 6u);
  for (const auto& [name, s] : together) {
    EXPECT_EQ(s.span.at("traceId").as_string(), "8e5f5d6a2c3b4d1e9f00112233445566") << name;
    EXPECT_EQ(id_of(reversed, name), id_of(together, name)) << name;
    EXPECT_EQ(parent_of(reversed, name), parent_of(together, name)) << name;
  }
  for (const auto* name : {"eliot:remote_task", "user:work"}) {
    EXPECT_EQ(id_of(alone, name), id_of(together, name)) << name;
    EXPECT_EQ(parent_of(alone, name), parent_of(together, name)) << name;
  }
  EXPECT_EQ(render(read({p.ferry, p.python})).lines, render(read({p.ferry, p.python})).lines);
}

TEST(otlp_view, parents_follow_the_levels_across_files_and_each_file_is_a_resource) {
  three_processes p;
  const auto out = render(read({p.ferry, p.python}));  // the node's file comes with ferry's
  const auto spans = spans_of(out);
  ASSERT_EQ(spans.size(), 6u);
  EXPECT_EQ(out.spans, 6u);
  EXPECT_FALSE(spans.at("ferry:run").span.contains("parentSpanId"));
  EXPECT_EQ(id_of(spans, "ferry:run"), otlp_span_id(uuid, {}));
  const std::map<std::string, std::string> parent = {{"ferry:agent:task", "ferry:run"},
                                                     {"ferry:node:materialise", "ferry:agent:task"},
                                                     {"ferry:materialise:layer", "ferry:node:materialise"},
                                                     {"eliot:remote_task", "ferry:agent:task"},
                                                     {"user:work", "eliot:remote_task"}};
  for (const auto& [child, expected] : parent) EXPECT_EQ(parent_of(spans, child), id_of(spans, expected)) << child;
  EXPECT_EQ(id_of(spans, "ferry:node:materialise"), otlp_span_id(uuid, {2, 2}));

  const std::map<std::string, std::pair<std::string, std::string>> resource = {
      {"ferry:run", {"ferry", "run.jsonl"}},
      {"ferry:agent:task", {"ferry", "run.jsonl"}},
      {"ferry:node:materialise", {"ferry-node", "run.node-n1-0.jsonl"}},
      {"ferry:materialise:layer", {"ferry-node", "run.node-n1-0.jsonl"}},
      {"eliot:remote_task", {"python", "child-77.jsonl"}},
      {"user:work", {"python", "child-77.jsonl"}}};
  for (const auto& [name, where] : resource) {
    EXPECT_EQ(spans.at(name).service, where.first) << name;
    EXPECT_EQ(spans.at(name).file, where.second) << name;
  }
  // ferry's resource says which ferry and which process.
  const auto request = json::parse(out.lines.at(0)).as_object();
  bool found = false;
  for (const auto& rs : request.at("resourceSpans").as_array()) {
    const auto& r = rs.at("resource").as_object();
    if (string_attribute(r, "service.name") != "ferry") continue;
    found = true;
    EXPECT_EQ(string_attribute(r, "service.version"), "1.2.3");
    ASSERT_NE(attribute(r, "process.pid"), nullptr);
    EXPECT_EQ(attribute(r, "process.pid")->at("intValue"), "42");
  }
  EXPECT_TRUE(found);
  // The message inside user:work is an event of it.
  const auto& events = spans.at("user:work").span.at("events").as_array();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].at("name"), "user:hello");
  EXPECT_EQ(events[0].at("timeUnixNano"), "101200000000");
  EXPECT_EQ(attribute(events[0].as_object(), "ferry.n")->at("intValue"), "1");
  EXPECT_EQ(out.events, 1u);
  EXPECT_EQ(out.left_out_messages, 0u);
}

TEST(otlp_view, status_is_ok_or_error_with_the_reason) {
  temp_dir dir;
  const lines_of t;
  const auto set = read({dir.write(
      "t.jsonl", t.start("ferry:run", "1", 10.0) + t.start("s3:request", "2,1", 10.1, R"(,"attempt":1)") +
                     t.end("s3:request", "2,2", 10.2, "failed",
                           R"(,"exception":"ferry.net","reason":"the bucket is gone","retry_in_ms":50)") +
                     t.start("user:step", "3,1", 10.3) +
                     t.end("user:step", "3,2", 10.4, "failed", R"(,"exception":"builtins.ValueError")") +
                     t.end("ferry:run", "4", 11.0))});
  const auto spans = spans_of(render(set));
  EXPECT_EQ(spans.at("ferry:run").span.at("status"), (json::object{{"code", 1}}));
  const auto& failed = spans.at("s3:request").span;
  EXPECT_EQ(failed.at("status"), (json::object{{"code", 2}, {"message", "the bucket is gone"}}));
  EXPECT_EQ(failed.at("kind"), 3);  // a request to storage: a client span
  EXPECT_EQ(spans.at("ferry:run").span.at("kind"), 1);
  EXPECT_EQ(attribute(failed, "ferry.exception"), nullptr);  // in the status and the event, not as fields
  EXPECT_EQ(attribute(failed, "ferry.reason"), nullptr);
  EXPECT_EQ(attribute(failed, "ferry.retry_in_ms")->at("intValue"), "50");
  const auto& events = failed.at("events").as_array();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].at("name"), "exception");
  EXPECT_EQ(events[0].at("timeUnixNano"), "10200000000");
  EXPECT_EQ(string_attribute(events[0].as_object(), "exception.type"), "ferry.net");
  EXPECT_EQ(string_attribute(events[0].as_object(), "exception.message"), "the bucket is gone");
  // Without a reason, the exception is the message.
  EXPECT_EQ(spans.at("user:step").span.at("status"), (json::object{{"code", 2}, {"message", "builtins.ValueError"}}));
}

TEST(otlp_view, an_action_without_end_lasts_to_the_last_message_with_no_status) {
  temp_dir dir;
  const lines_of t;
  lines_of other;
  other.task = "U";
  const auto set = read({dir.write("t.jsonl", t.start("ferry:run", "1", 10.0) +
                                                  t.start("ferry:agent:task", "2,1", 10.5, R"(,"node":"n1")") +
                                                  t.end("ferry:run", "3", 12.0, "failed", R"(,"reason":"node lost")") +
                                                  other.message("user:late", "1", 13.5))});
  const auto out = render(set);
  const auto spans = spans_of(out);
  ASSERT_EQ(spans.size(), 2u);
  const auto& lost = spans.at("ferry:agent:task").span;
  EXPECT_EQ(lost.at("startTimeUnixNano"), "10500000000");
  EXPECT_EQ(lost.at("endTimeUnixNano"), "13500000000");  // the set's last message, from another task
  EXPECT_EQ(lost.at("status"), json::object{});
  ASSERT_NE(attribute(lost, "ferry.incomplete"), nullptr);
  EXPECT_EQ(attribute(lost, "ferry.incomplete")->at("boolValue"), true);
  EXPECT_EQ(attribute(spans.at("ferry:run").span, "ferry.incomplete"), nullptr);
  EXPECT_EQ(spans.at("ferry:run").span.at("endTimeUnixNano"), "12000000000");
  // A task that is one message has no span to hold it.
  EXPECT_EQ(out.left_out_messages, 1u);
  EXPECT_EQ(out.lines.size(), 1u);
}

TEST(otlp_view, nothing_secret_leaves) {
  temp_dir dir;
  const lines_of t;
  const auto set = read({dir.write(
      "t.jsonl",
      t.start("ferry:run", "1", 10.0,
              R"(,"aws_secret_access_key":"SECRET-1","session_token":"SECRET-2","Authorization":"SECRET-3")"
              R"(,"X-Amz-Security-Token":"SECRET-4","X-Amz-Date":"20240101T000000Z","password":"SECRET-5")"
              R"(,"config":{"token":"SECRET-6","depth":3},"headers":[{"authorization":"SECRET-7"}])"
              R"(,"url":"https://user:SECRET-8@bucket.s3.example/key?X-Amz-Signature=SECRET-9&X-Amz-Credential=AKID%2F1")"
              R"(,"note":"from https://b/k?X-Amz-Signature=SECRET-10&x=1")") +
          t.message("s3:call", "2", 10.1, R"(,"signature":"SECRET-11","operation":"GetObject")") +
          t.end("ferry:run", "3", 11.0, "failed", R"(,"reason":"GET https://b/k?X-Amz-Signature=SECRET-12 failed")"))});
  const auto out = render(set);
  for (const auto& line : out.lines) {
    EXPECT_EQ(line.find("SECRET-"), std::string::npos) << line;
    EXPECT_EQ(line.find("X-Amz-Date"), std::string::npos) << line;
  }
  const auto run = spans_of(out).at("ferry:run").span;
  // Six names at the top, config.token and headers[0].authorization inside.
  EXPECT_EQ(run.at("droppedAttributesCount"), 8);
  EXPECT_EQ(string_attribute(run, "url.full"), "https://bucket.s3.example/key");
  EXPECT_EQ(string_attribute(run, "ferry.note"), "from https://b/k?X-Amz-Signature=REDACTED&x=1");
  const auto& config = attribute(run, "ferry.config")->at("kvlistValue").at("values").as_array();
  ASSERT_EQ(config.size(), 1u);
  EXPECT_EQ(config[0].at("key"), "depth");
  EXPECT_EQ(run.at("status").at("message"), "GET https://b/k?X-Amz-Signature=REDACTED failed");
  const auto& event = run.at("events").at(0).as_object();
  EXPECT_EQ(event.at("droppedAttributesCount"), 1);
  EXPECT_EQ(string_attribute(event, "rpc.method"), "GetObject");
}

TEST(otlp_view, integers_are_decimal_strings_and_values_keep_their_types) {
  temp_dir dir;
  const lines_of t;
  const auto set = read({dir.write(
      "t.jsonl", t.start("ferry:run", "1", 1700000000.123456,
                         R"(,"bytes":12345678901234,"ratio":0.25,"cached":true,"layers":["a",2,null],"big":18446744073709551615)"
                         R"(,"nothing":null,"port":2222,"node":"n1","negative":-5,"empty":[],"none":{})") +
                     t.end("ferry:run", "2", 1700000001.5))});
  const auto out = render(set);
  ASSERT_EQ(out.lines.size(), 1u);
  const auto run = spans_of(out).at("ferry:run").span;
  EXPECT_EQ(run.at("startTimeUnixNano"), "1700000000123456000");
  EXPECT_EQ(run.at("endTimeUnixNano"), "1700000001500000000");
  EXPECT_EQ(*attribute(run, "ferry.bytes"), (json::object{{"intValue", "12345678901234"}}));
  EXPECT_EQ(*attribute(run, "ferry.negative"), (json::object{{"intValue", "-5"}}));
  EXPECT_EQ(*attribute(run, "server.port"), (json::object{{"intValue", "2222"}}));
  EXPECT_EQ(*attribute(run, "ferry.big"), (json::object{{"stringValue", "18446744073709551615"}}));
  EXPECT_EQ(*attribute(run, "ferry.ratio"), (json::object{{"doubleValue", 0.25}}));
  EXPECT_EQ(*attribute(run, "ferry.cached"), (json::object{{"boolValue", true}}));
  EXPECT_EQ(*attribute(run, "ferry.node"), (json::object{{"stringValue", "n1"}}));
  EXPECT_EQ(*attribute(run, "ferry.layers"),
            json::parse(R"({"arrayValue":{"values":[{"stringValue":"a"},{"intValue":"2"},{}]}})"));
  EXPECT_EQ(*attribute(run, "ferry.empty"), json::parse(R"({"arrayValue":{}})"));
  EXPECT_EQ(*attribute(run, "ferry.none"), json::parse(R"({"kvlistValue":{}})"));
  EXPECT_EQ(attribute(run, "ferry.nothing"), nullptr);
  EXPECT_EQ(string_attribute(run, "ferry.task_level"), "/");
  EXPECT_TRUE(run.at("kind").is_int64());
  // The text itself: the number as a string, never as a JSON number.
  EXPECT_NE(out.lines[0].find(R"({"intValue":"12345678901234"})"), std::string::npos) << out.lines[0];
  EXPECT_NE(out.lines[0].find(R"("startTimeUnixNano":"1700000000123456000")"), std::string::npos);
}

TEST(otlp_view, a_large_task_is_cut_into_lines_within_the_limit) {
  temp_dir dir;
  const lines_of t;
  std::string text = t.start("ferry:run", "1", 10.0);
  for (int i = 0; i < 200; ++i) {
    text += t.start("ferry:agent:task", fmt::format("{},1", i + 2), 10.0 + i * 0.01, R"(,"node":"n1")");
    text += t.end("ferry:agent:task", fmt::format("{},2", i + 2), 10.005 + i * 0.01);
  }
  text += t.end("ferry:run", "202", 13.0);
  const auto set = read({dir.write("t.jsonl", text)});
  EXPECT_EQ(render(set).lines.size(), 1u);
  const auto out = render(set, {.max_line_bytes = 4000});
  EXPECT_GT(out.lines.size(), 10u);
  std::set<std::string> ids;
  for (const auto& line : out.lines) {
    EXPECT_LE(line.size(), 4000u);
    const auto request = json::parse(line);
    for (const auto& rs : request.at("resourceSpans").as_array())
      for (const auto& s : rs.at("scopeSpans").at(0).at("spans").as_array()) ids.insert(std::string(s.at("spanId").as_string()));
  }
  EXPECT_EQ(ids.size(), 201u);
  EXPECT_EQ(out.spans, 201u);
}

// The independent decoder reads every kind of value, status and resource the samples above hold, and
// finds the parent links resolved.
TEST(otlp_view, the_independent_decoder_reads_it_all) {
  three_processes p;
  lines_of t;
  t.task = "values-task";  // an id that is not a UUID: its trace id is hashed
  p.dir.write("values.jsonl",
                          t.start("ferry:run", "1", 10.0,
                                  R"(,"bytes":12345678901234,"ratio":0.25,"cached":true,"layers":["a",2,null,{"k":[]}])"
                                  R"(,"big":18446744073709551615,"port":2222,"none":{},"password":"x")") +
                              t.start("s3:request", "2,1", 10.1) +
                              t.end("s3:request", "2,2", 10.2, "failed", R"(,"exception":"E","reason":"R")") +
                              t.start("ferry:agent:task", "3,1", 10.3) + t.end("ferry:run", "4", 11.0));
  const auto out = render(read({p.ferry, p.python, p.dir / "values.jsonl"}));
  const auto file = p.dir / "out.jsonl";
  std::ofstream(file) << [&] {
    std::string all;
    for (const auto& l : out.lines) all += l + "\n";
    return all;
  }();
  const auto summary = test::decode_otlp(file);
  ASSERT_FALSE(summary.empty());
  EXPECT_TRUE(summary.at("problems").as_array().empty()) << json::serialize(summary.at("problems"));
  EXPECT_EQ(summary.at("span_count").as_int64(), static_cast<std::int64_t>(out.spans));
  EXPECT_EQ(summary.at("span_count").as_int64(), 9);
  EXPECT_EQ(summary.at("unresolved_parents").as_int64(), 0);
  EXPECT_EQ(summary.at("duplicate_span_ids").as_int64(), 0);
  std::map<std::string, std::string> service;
  for (const auto& s : summary.at("spans").as_array())
    service[std::string(s.at("name").as_string())] = s.at("service").as_string();
  EXPECT_EQ(service["user:work"], "python");
  EXPECT_EQ(service["ferry:node:materialise"], "ferry-node");
}

}  // namespace
}  // namespace ferry::tracing
