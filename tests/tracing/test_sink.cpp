#include "tracing/action.hpp"
#include "tracing/chrome_view.hpp"
#include "tracing/task_tree.hpp"
#include "tracing/sink.hpp"
#include "tracing/trace_file.hpp"

#include "support/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <thread>

namespace ferry::tracing {
namespace {

using test::temp_dir;

TEST(sink, lines_from_many_threads_arrive_whole_and_all_of_them) {
  temp_dir dir;
  const auto file = dir / "t.jsonl";
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  {
    diagnostics diag;
    auto out = sink::open(file, diag);
    ASSERT_TRUE(out) << diag.message;
    auto root = action::start_task(**out, "test:root");
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&root, t] {
        for (int i = 0; i < per_thread; ++i) root.log("test:tick", {{"thread", t}, {"i", i}});
      });
    for (auto& w : workers) w.join();
    root.succeed();
  }
  std::istringstream in(test::read_file(file));
  std::string line;
  std::size_t count = 0;
  std::set<std::uint32_t> levels;
  while (std::getline(in, line)) {
    const auto v = boost::json::parse(line);  // throws on a torn line
    levels.insert(static_cast<std::uint32_t>(v.at("task_level").as_array().back().as_int64()));
    ++count;
  }
  EXPECT_EQ(count, static_cast<std::size_t>(threads * per_thread + 2));
  // Levels stay dense under concurrency: every one from 1 to the end, each exactly once.
  EXPECT_EQ(levels.size(), count);
  EXPECT_EQ(*levels.rbegin(), count);
}

TEST(sink, flush_makes_everything_visible_while_the_sink_stays_open) {
  temp_dir dir;
  const auto file = dir / "t.jsonl";
  diagnostics diag;
  auto out = sink::open(file, diag);
  ASSERT_TRUE(out) << diag.message;
  (*out)->write(R"({"a":1})");
  (*out)->flush();
  EXPECT_EQ(test::read_file(file), "{\"a\":1}\n");
}

TEST(sink, an_unwritable_path_is_an_error_naming_it) {
  temp_dir dir;
  dir.write("file", "x");
  diagnostics diag;
  auto out = sink::open(dir / "file" / "t.jsonl", diag);
  ASSERT_FALSE(out);
  EXPECT_NE(diag.message.find("file/t.jsonl"), std::string::npos) << diag.message;
}

TEST(trace_file, malformed_lines_are_reported_by_file_and_line_and_the_rest_is_used) {
  temp_dir dir;
  const auto file = dir.write("t.jsonl",
                              R"({"task_uuid":"u","task_level":[1],"timestamp":1.0,"message_type":"a"})"
                              "\nnot json\n"
                              R"({"task_uuid":"u","task_level":[2],"timestamp":2.0})"
                              "\n\n"
                              R"({"task_uuid":"u","task_level":[3],"timestamp":3.0,"message_type":"b"})"
                              "\n");
  diagnostics diag;
  auto set = read_traces({file}, diag);
  ASSERT_TRUE(set) << diag.message;
  EXPECT_EQ(set->messages.size(), 2u);
  ASSERT_EQ(set->problems.size(), 2u);
  EXPECT_EQ(set->problems[0].rfind(file.string() + ":2: not JSON", 0), 0u) << set->problems[0];
  EXPECT_EQ(set->problems[1].rfind(file.string() + ":3: neither action_type nor message_type", 0), 0u)
      << set->problems[1];
  EXPECT_FALSE(read_traces({dir / "missing.jsonl"}, diag));
  EXPECT_NE(diag.message.find("missing.jsonl"), std::string::npos);
}

// The views compute in integer microseconds: a timestamp of 1e300 (or a negative one) overflowed them.
TEST(trace_file, a_timestamp_out_of_range_is_a_problem_and_every_view_takes_the_rest) {
  temp_dir dir;
  const auto file = dir.write("t.jsonl",
                              R"({"task_uuid":"u","task_level":[1],"timestamp":1e300,"action_type":"a","action_status":"started"})"
                              "\n"
                              R"({"task_uuid":"u","task_level":[2],"timestamp":-1.5,"action_type":"a","action_status":"succeeded"})"
                              "\n"
                              R"({"task_uuid":"v","task_level":[1],"timestamp":1.5e9,"action_type":"b","action_status":"started"})"
                              "\n"
                              R"({"task_uuid":"v","task_level":[2],"timestamp":1.5e9,"action_type":"b","action_status":"succeeded"})"
                              "\n");
  diagnostics diag;
  auto set = read_traces({file}, diag);
  ASSERT_TRUE(set) << diag.message;
  EXPECT_EQ(set->messages.size(), 2u);
  ASSERT_EQ(set->problems.size(), 2u);
  EXPECT_EQ(set->problems[0], file.string() + ":1: timestamp out of range");
  EXPECT_EQ(set->problems[1], file.string() + ":2: timestamp out of range");
  const auto tasks = build_task_trees(*set);
  const auto chrome = render_chrome(*set, tasks);
  // The process name, action b, and its lane's name and sort index.
  EXPECT_EQ(chrome.at("traceEvents").as_array().size(), 4u);
}

}  // namespace
}  // namespace ferry::tracing
