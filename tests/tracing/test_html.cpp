// `ferry trace html`: one self-contained page, checked as text and as Chromium renders it.
#include "tracing/html_view.hpp"

#include "support/eliot.hpp"
#include "support/process.hpp"
#include "support/sample_traces.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

namespace ferry::tracing {
namespace {

using test::temp_dir;

constexpr const char* chromium = "/usr/bin/chromium";

// The hand-built map with task t3 lost with its node (no end message): succeeded, failed (t4) and
// incomplete (t3, drawn to the map's end) bars, all wide enough to see.
std::string map_with_a_lost_task() {
  auto text = test::map_trace();
  const auto at = text.find(R"("task_level":[7,2])");
  const auto begin = text.rfind('\n', at) + 1;
  text.erase(begin, text.find('\n', at) + 1 - begin);
  return text;
}

std::string page_for(temp_dir& dir, const std::string& trace, std::string_view name = "map.jsonl") {
  diagnostics diag;
  const auto set = read_traces({dir.write(name, trace)}, diag);
  EXPECT_TRUE(set) << diag.message;
  const auto tasks = build_task_trees(*set);
  return render_html(*set, tasks, compute_stats(*set, tasks));
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The page as rendered, without its scripts (whose source holds the markup it writes).
std::string without_scripts(std::string dom) {
  for (auto at = dom.find("<script"); at != std::string::npos; at = dom.find("<script", at)) {
    const auto end = dom.find("</script>", at);
    dom.erase(at, end == std::string::npos ? std::string::npos : end + 9 - at);
  }
  return dom;
}

test::process_result run_chromium(const temp_dir& dir, const std::filesystem::path& page, const std::string& mode,
                                  const std::string& fragment = "") {
  // A fresh profile (each test has its own dir and runs Chromium once), and nothing that reaches the network.
  const auto profile = dir / "profile";
  return test::run({chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--user-data-dir=" + profile.string(), mode, "--window-size=1400,900",
                    "file://" + page.string() + fragment});
}

TEST(html_view, the_page_is_self_contained_and_script_safe) {
  temp_dir dir;
  // A field that would close the data's <script> early if it were copied in as it is.
  auto trace = test::map_trace();
  trace.insert(trace.find(R"(,"inputs":4)"), R"(,"note":"</script><script>document.title='owned'</script>")");
  const auto html = page_for(dir, trace);
  EXPECT_EQ(count(html, "</script>"), 2u);  // the data's and the code's
  EXPECT_EQ(count(html, "<script"), 2u);
  for (const char* fetch : {"https://", "src=", "<link", "@import", "url(http"})
    EXPECT_EQ(html.find(fetch), std::string::npos) << fetch;
  // The data parses back, with the field intact.
  const auto begin = html.find(R"(id="ferry-data">)") + 16;
  const auto data = boost::json::parse(html.substr(begin, html.find("</script>", begin) - begin)).as_object();
  EXPECT_EQ(data.at("spans").as_array().size(), 11u);
  EXPECT_NE(boost::json::serialize(data.at("details")).find("</script><script>document.title"), std::string::npos);
  EXPECT_EQ(data.at("stats").at("jobs").as_array().size(), 1u);
}

TEST(html_view, an_incomplete_task_is_drawn_as_incomplete) {
  temp_dir dir;
  const auto html = page_for(dir, map_with_a_lost_task());
  const auto begin = html.find(R"(id="ferry-data">)") + 16;
  const auto data = boost::json::parse(html.substr(begin, html.find("</script>", begin) - begin)).as_object();
  int incomplete = 0;
  const auto& spans = data.at("spans").as_array();
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto& s = spans[i].as_array();
    if (s[4].as_int64() != 2) continue;
    ++incomplete;
    EXPECT_EQ(s[3].as_double() - s[2].as_double(), 10);  // 1010 .. the map's end at 1020
    EXPECT_EQ(data.at("details").as_array()[i].at("note"), "no end message: incomplete");
  }
  EXPECT_EQ(incomplete, 1);
  EXPECT_EQ(data.at("stats").at("jobs").at(0).at("incomplete_tasks"), 1);
}

TEST(html_view, a_cancellation_has_its_own_status_and_counts) {
  temp_dir dir;
  const auto html = page_for(dir, test::interrupted_map_trace());
  const auto begin = html.find(R"(id="ferry-data">)") + 16;
  const auto data = boost::json::parse(html.substr(begin, html.find("</script>", begin) - begin)).as_object();
  std::map<std::int64_t, int> by_status;
  for (const auto& s : data.at("spans").as_array()) ++by_status[s.as_array()[4].as_int64()];
  EXPECT_EQ(by_status[1], 1);  // b failed
  EXPECT_EQ(by_status[3], 4);  // the two attempts, c and the map: cancelled, not failed
  EXPECT_EQ(by_status[0], 2);
  EXPECT_EQ(data.at("stats").at("jobs").at(0).at("cancelled_tasks"), 1);
  EXPECT_EQ(data.at("stats").at("jobs").at(0).at("failed_tasks"), 1);
}

class html_in_chromium : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(chromium))
      GTEST_SKIP() << "no " << chromium << " (Debian's chromium package; scripts/setup.sh installs it)";
  }
  temp_dir dir;
};

TEST_F(html_in_chromium, a_screenshot_shows_the_bars_in_their_status_colours) {
  const auto page = dir.write("timeline.html", page_for(dir, map_with_a_lost_task()));
  const auto png = dir / "shot.png";
  const auto shot = run_chromium(dir, page, "--screenshot=" + png.string());
  ASSERT_EQ(shot.exit_code, 0) << shot.err;
  ASSERT_TRUE(std::filesystem::exists(png)) << shot.err;
  const auto r = test::run({test::system_python, test::peer_script("png_colours.py"), png.string(), "2f9e44",
                            "e03131", "f08c00"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto counts = boost::json::parse(r.out).as_object();
  EXPECT_EQ(counts.at("width"), 1400);
  // Plot about 1130 px wide for 20.4 s: the map's bar alone is ~1100 x 13 px of green; t4 (4 s, failed)
  // ~220 x 13 of red; t3 (10 s, incomplete) ~550 x 13 of amber. The legend's swatches are 100 px each.
  EXPECT_GT(counts.at("2f9e44").as_int64(), 10000) << r.out;
  EXPECT_GT(counts.at("e03131").as_int64(), 1500) << r.out;
  EXPECT_GT(counts.at("f08c00").as_int64(), 4000) << r.out;
}

TEST_F(html_in_chromium, the_rendered_dom_has_every_bar_and_table_row) {
  const auto page = dir.write("timeline.html", page_for(dir, map_with_a_lost_task()));
  const auto r = run_chromium(dir, page, "--dump-dom");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dom = without_scripts(r.out);
  EXPECT_NE(dom.find(R"(data-rendered="yes")"), std::string::npos) << r.err;
  EXPECT_NE(dom.find(R"(data-bars="11")"), std::string::npos);
  EXPECT_EQ(count(dom, R"(<rect class="bar s)"), 11u);
  EXPECT_EQ(count(dom, R"(<rect class="bar s1")"), 1u);  // t4 failed
  EXPECT_EQ(count(dom, R"(<rect class="bar s2")"), 1u);  // t3 incomplete
  EXPECT_EQ(count(dom, R"(<tr class="type-row)"), 7u);   // action types
  EXPECT_EQ(count(dom, R"(<details class="path")"), 1u);
  EXPECT_GT(count(dom, R"(<rect class="bin")"), 0u);     // the pending histogram
  EXPECT_NE(dom.find(R"(<path class="prov" d="M)"), std::string::npos);  // nodes over time
  EXPECT_NE(dom.find("map.jsonl · node n1"), std::string::npos);
}

TEST_F(html_in_chromium, the_address_zooms_to_a_view) {
  // From 13 s to 15 s after the first message only the map, t3 (10 .. 20) and t4 (12 .. 16) are in view.
  const auto page = dir.write("timeline.html", page_for(dir, map_with_a_lost_task()));
  const auto r = run_chromium(dir, page, "--dump-dom", "#view=13,15");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dom = without_scripts(r.out);
  EXPECT_NE(dom.find(R"(data-bars="3")"), std::string::npos) << r.err;
  EXPECT_EQ(count(dom, R"(<rect class="bar s1")"), 1u);
  EXPECT_EQ(count(dom, R"(<rect class="bar s2")"), 1u);
  EXPECT_NE(dom.find("+14.0 s"), std::string::npos);  // the axis is in tenths of a second now
}

TEST_F(html_in_chromium, hovering_a_bar_shows_its_fields_and_the_wheel_zooms_around_the_pointer) {
  // A probe after the page's own script moves the pointer onto the failed task and turns the wheel there,
  // then leaves what it saw on <body> for --dump-dom.
  auto html = page_for(dir, map_with_a_lost_task());
  html.insert(html.rfind("</body>"), R"(<script>
const bar = document.querySelector('rect.bar.s1'), box = bar.getBoundingClientRect();
const at = {bubbles: true, cancelable: true, clientX: box.x + 2, clientY: box.y + 2};
bar.dispatchEvent(new MouseEvent('mousemove', at));
document.body.dataset.tip = document.getElementById('tip').textContent;
bar.dispatchEvent(new WheelEvent('wheel', Object.assign({deltaY: -1000}, at)));
document.body.dataset.view = location.hash;
</script>)");
  const auto page = dir.write("timeline.html", html);
  const auto r = run_chromium(dir, page, "--dump-dom");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"re(data-tip="([^"]*)")re"))) << r.err;
  const std::string tip = m[1];
  const std::vector<std::string> expected_parts = {fmt::format("{}  failed", action_types::agent::task),
                                                   "duration 4.000 s", "task M /8", "node n2", "submitted_at: 1000",
                                                   "reason: exit status 3"};
  for (const auto& expected : expected_parts)
    EXPECT_NE(tip.find(expected), std::string::npos) << expected << " in " << tip;
  // The pointer was at t4's start, 12 s in; the wheel narrowed the 20.4 s view by e^-1.5 around it.
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"re(data-view="#view=([-0-9.e]+),([-0-9.e]+)")re"))) << r.err;
  const double from = std::stod(m[1]), to = std::stod(m[2]);
  EXPECT_NEAR(to - from, 20.4 * std::exp(-1.5), 0.01);
  EXPECT_LT(from, 12.0);
  EXPECT_GT(to, 12.1);
}

TEST_F(html_in_chromium, cancelled_bars_and_rows_are_grey_not_red) {
  const auto page = dir.write("timeline.html", page_for(dir, test::interrupted_map_trace()));
  const auto r = run_chromium(dir, page, "--dump-dom");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dom = without_scripts(r.out);
  EXPECT_EQ(count(dom, R"(<rect class="bar s3")"), 4u) << r.err;
  EXPECT_EQ(count(dom, R"(<rect class="bar s1")"), 1u);
  EXPECT_NE(dom.find("<th>cancelled</th>"), std::string::npos);
  EXPECT_NE(dom.find(R"(<tr class="job cancelled">)"), std::string::npos);
}

// A group's label (a file and a node) longer than the gutter left of the bars is cut to fit it, never
// drawn over the bars; its whole text is its tooltip.
TEST_F(html_in_chromium, labels_never_run_over_the_bars) {
  const std::string name = "20260101T000000-123456-ferry-map.node-a-rather-long-node-name-from-a-cloud-provider-1.jsonl";
  auto html = page_for(dir, test::map_trace(), name);
  html.insert(html.rfind("</body>"), R"(<script>
let right = 0, left = Infinity;
for (const t of document.querySelectorAll('text.glabel')) { const b = t.getBBox(); right = Math.max(right, b.x + b.width); }
for (const b of document.querySelectorAll('rect.bar')) left = Math.min(left, +b.getAttribute('x'));
let over = 0;
for (const t of document.querySelectorAll('text.blabel')) {
  const bar = t.previousElementSibling, b = t.getBBox();
  if (b.x + b.width > +bar.getAttribute('x') + +bar.getAttribute('width')) ++over;
}
document.body.dataset.labels = right.toFixed(1) + ',' + left.toFixed(1) + ',' + over;
</script>)");
  const auto page = dir.write("timeline.html", html);
  const auto r = run_chromium(dir, page, "--dump-dom");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"re(data-labels="([0-9.]+),([0-9.]+),([0-9]+)")re"))) << r.err;
  EXPECT_LT(std::stod(m[1]), std::stod(m[2])) << "a group label reaches past the first bar's left edge";
  EXPECT_EQ(m[3], "0") << "a bar's label runs past its bar";
  EXPECT_NE(r.out.find("<title>" + name + " · node n1</title>"), std::string::npos);
}

TEST_F(html_in_chromium, a_trace_without_runs_or_maps_still_renders) {
  const auto trace = test::msg("1", 1, action_types::packaging::pack, "started") +
                     test::msg("2,1", 1.5, action_types::packaging::hash, "started") +
                     test::msg("2,2", 2, action_types::packaging::hash, "succeeded") +
                     test::msg("3", 3, action_types::packaging::pack, "succeeded");
  const auto page = dir.write("timeline.html", page_for(dir, trace));
  const auto r = run_chromium(dir, page, "--dump-dom");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dom = without_scripts(r.out);
  EXPECT_NE(dom.find(R"(data-rendered="yes")"), std::string::npos) << r.err;
  EXPECT_EQ(count(dom, R"(<rect class="bar s0")"), 2u);
}

}  // namespace
}  // namespace ferry::tracing
