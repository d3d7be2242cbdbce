// The node program's plan bookkeeping (agent/node/plan_progress.hpp), sans-io: a scripted materialise of a
// plan whose lines arrive interleaved with the layers' work, run whole, then again with a failure of the
// reading, a failure of a layer and a cancellation injected at every step.
#include "agent/node/plan_progress.hpp"

#include "agent/node/error.hpp"
#include "agent/node/site_file.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ferry::agent::node {
namespace {

layer_source layer(std::string id, std::uint64_t content) {
  layer_source l;
  l.id = std::move(id);
  l.name = "layer-" + l.id;
  l.shards.push_back({"http://storage/" + l.id, std::string(64, 'a'), 100, 1, content, std::string(64, 'b')});
  return l;
}

plan_line line_of(std::size_t index, std::string id, std::uint64_t content) {
  return placed_layer{index, layer(std::move(id), content)};
}

// One step of the script: a line arrives, a worker takes the next layer (and which it must be), or a
// layer's work ends (cached or fetched).
struct step {
  enum kind { line, next, finish } what;
  plan_line text = plan_end{};
  std::string id;  // next: the layer expected; finish: the layer that ends
  bool cached = false;
};

std::vector<step> script() {
  return {
      {step::line, line_of(0, "aa", 10)},
      {step::line, line_of(1, "bb", 30)},
      {step::next, {}, "bb"},  // the largest waiting first
      {step::line, line_of(2, "aa", 10)},  // a place of its own, no second download
      {step::next, {}, "aa"},
      {step::finish, {}, "bb"},
      {step::line, line_of(3, "cc", 20)},
      {step::finish, {}, "aa", true},
      {step::next, {}, "cc"},
      {step::line, plan_end{4, 1}},
      {step::finish, {}, "cc"},
  };
}

std::string dir_of(const std::string& id) { return "/cache/layers/" + id; }

enum class injected { none, reading_fails, layer_fails, cancelled };

struct run_result {
  plan_progress plan;
  std::vector<std::string> handed_out_after;  // layers handed out after the injection
  bool injected_here = false;
};

// Runs the script, injecting `what` at step `at`; the layers in progress then end as stopped.
run_result run_script(injected what, std::size_t at) {
  run_result r;
  std::vector<const layer_source*> running;
  bool stopped = false;
  const auto s = script();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto& st = s[i];
    diagnostics diag;
    if (i == at && what == injected::reading_fails) {
      diag.set("the plan ended before its end line");
      r.plan.reading_failed(make_error_code(errc::bad_plan), diag);
      r.injected_here = stopped = true;
      continue;
    }
    if (i == at && what == injected::cancelled) {
      r.plan.reading_failed(boost::asio::error::operation_aborted, diag);
      r.injected_here = stopped = true;
      continue;
    }
    switch (st.what) {
      case step::line:
        if (!stopped) (void)r.plan.take(st.text, diag);
        break;
      case step::next: {
        const auto* l = r.plan.next();
        if (stopped) {
          if (l) r.handed_out_after.push_back(l->id);
        } else {
          EXPECT_NE(l, nullptr) << "step " << i;
          if (l) {
            EXPECT_EQ(l->id, st.id) << "step " << i;
            running.push_back(l);
          }
        }
        break;
      }
      case step::finish: {
        auto it = std::find_if(running.begin(), running.end(), [&](auto* l) { return l->id == st.id; });
        if (it == running.end()) break;
        const auto* l = *it;
        running.erase(it);
        if (i == at && what == injected::layer_fails) {
          diag.set("downloading layer " + l->name + ": storage answered HTTP 403");
          r.plan.finished(*l, make_error_code(errc::download_failed), diag);
          r.injected_here = stopped = true;
        } else if (stopped) {
          r.plan.finished(*l, error_code(boost::asio::error::operation_aborted), diag);
        } else {
          r.plan.finished(*l, layer_result{st.cached, st.cached ? 0u : 100u}, diag);
        }
        break;
      }
    }
  }
  for (const auto* l : running) r.plan.finished(*l, error_code(boost::asio::error::operation_aborted), {});
  return r;
}

TEST(plan_progress, a_whole_plan_gives_its_layers_in_plan_order_each_made_once) {
  auto r = run_script(injected::none, SIZE_MAX);
  diagnostics diag;
  EXPECT_FALSE(r.plan.failure(diag));
  auto env = r.plan.environment(dir_of, diag);
  ASSERT_TRUE(env) << diag.message;
  EXPECT_EQ(env->python_path, (std::vector<std::string>{dir_of("aa"), dir_of("bb"), dir_of("aa"), dir_of("cc")}));
  EXPECT_EQ(env->workdir, dir_of("bb"));
  EXPECT_EQ(env->layers_cached, 1u);
  EXPECT_EQ(env->layers_fetched, 2u);
  EXPECT_EQ(env->bytes_fetched, 200u);
  EXPECT_EQ(r.plan.ids(), (std::set<std::string>{"aa", "bb", "cc"}));
}

TEST(plan_progress, a_failure_at_any_step_stops_the_plan_and_is_the_one_reported) {
  const auto steps = script().size();
  for (auto what : {injected::reading_fails, injected::layer_fails, injected::cancelled}) {
    for (std::size_t at = 0; at < steps; ++at) {
      auto r = run_script(what, at);
      if (!r.injected_here) continue;  // a layer's failure only where a layer ends
      SCOPED_TRACE(::testing::Message() << "injected " << static_cast<int>(what) << " at step " << at);
      EXPECT_TRUE(r.plan.stopping());
      EXPECT_TRUE(r.handed_out_after.empty()) << "a layer was handed out after the plan stopped";
      EXPECT_EQ(r.plan.next(), nullptr);
      diagnostics diag;
      const auto failed = r.plan.failure(diag);
      ASSERT_TRUE(failed);
      switch (what) {
        case injected::reading_fails:
          EXPECT_EQ(*failed, errc::bad_plan);
          EXPECT_EQ(diag.message, "the plan ended before its end line");
          break;
        case injected::layer_fails:
          // The layer's own failure, not the plan's stop nor the other layers' aborts.
          EXPECT_EQ(*failed, errc::download_failed);
          EXPECT_NE(diag.message.find("HTTP 403"), std::string::npos) << diag.message;
          break;
        default:
          EXPECT_EQ(*failed, boost::asio::error::operation_aborted);
      }
    }
  }
}

TEST(plan_progress, a_plan_that_ends_short_or_out_of_shape_is_refused) {
  diagnostics diag;
  {
    plan_progress p;  // the end counts a place that never came
    ASSERT_TRUE(p.take(line_of(0, "aa", 1), diag));
    ASSERT_TRUE(p.take(plan_end{2, std::nullopt}, diag));
    p.finished(*p.next(), layer_result{}, diag);
    auto env = p.environment(dir_of, diag);
    ASSERT_FALSE(env);
    EXPECT_EQ(env.error(), errc::bad_plan);
    EXPECT_EQ(diag.message, "the plan ended without layer 2 of its 2");
  }
  {
    plan_progress p;  // a place beyond the count
    ASSERT_TRUE(p.take(line_of(5, "aa", 1), diag));
    ASSERT_TRUE(p.take(plan_end{1, std::nullopt}, diag));
    p.finished(*p.next(), layer_result{}, diag);
    EXPECT_FALSE(p.environment(dir_of, diag));
  }
  {
    plan_progress p;  // a second header, a line after the end
    auto second = p.take(plan_header{}, diag);
    ASSERT_FALSE(second);
    EXPECT_TRUE(p.stopping());
    plan_progress q;
    ASSERT_TRUE(q.take(plan_end{0, std::nullopt}, diag));
    EXPECT_FALSE(q.take(line_of(0, "aa", 1), diag));
    EXPECT_EQ(diag.message, "the plan goes on after its end line");
  }
  {
    plan_progress p;  // never ended, or a layer never made: cut short
    ASSERT_TRUE(p.take(line_of(0, "aa", 1), diag));
    EXPECT_EQ(p.environment(dir_of, diag).error(), boost::asio::error::operation_aborted);
    ASSERT_TRUE(p.take(plan_end{1, std::nullopt}, diag));
    EXPECT_EQ(p.environment(dir_of, diag).error(), boost::asio::error::operation_aborted);
  }
}

plan_site a_site() {
  plan_site s;
  s.path.push_back({site_path_entry::kind::layers, {std::string(64, 'a'), std::string(64, 'b')}, "/venv/site-packages"});
  s.path.push_back({site_path_entry::kind::stdlib, {}, "/usr/lib/python3.11"});
  s.path.push_back({site_path_entry::kind::raw, {}, "__editable__.x.__path_hook__"});
  s.imports.push_back({std::string(64, 'b'), "x.pth", "import x\n"});
  s.dirs.push_back({"/home/me/proj", std::string(64, 'a')});
  s.hide_node_site = true;
  return s;
}

TEST(plan_lines, a_site_reads_back_as_written_and_its_file_names_each_layer_by_its_directory) {
  diagnostics diag;
  auto back = parse_plan_line(site_line(a_site()), diag);
  ASSERT_TRUE(back) << diag.message;
  const auto* got = std::get_if<plan_site>(&*back);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->path.size(), 3u);
  EXPECT_EQ(got->path[0].ids.size(), 2u);
  EXPECT_EQ(got->path[0].raw, "/venv/site-packages");
  EXPECT_EQ(got->path[1].what, site_path_entry::kind::stdlib);
  EXPECT_EQ(got->path[2].raw, "__editable__.x.__path_hook__");
  ASSERT_EQ(got->imports.size(), 1u);
  EXPECT_EQ(got->imports[0].line, "import x\n");
  EXPECT_TRUE(got->hide_node_site);

  const auto text = site_file_text(*got, [](const std::string& id) { return "/cache/layers/" + id.substr(0, 2); });
  EXPECT_EQ(text,
            "{\"path\":[{\"dirs\":[\"/cache/layers/aa\",\"/cache/layers/bb\"],\"local\":\"/venv/site-packages\"},"
            "{\"stdlib\":true,\"local\":\"/usr/lib/python3.11\"},"
            "{\"raw\":\"__editable__.x.__path_hook__\",\"local\":\"__editable__.x.__path_hook__\"}],"
            "\"imports\":[{\"dir\":\"/cache/layers/bb\",\"file\":\"x.pth\",\"line\":\"import x\\n\"}],"
            "\"dirs\":[[\"/home/me/proj\",\"/cache/layers/aa\"]],\"hide_node_site\":true}\n");

  auto bad = a_site();
  bad.imports[0].id = "not hex";
  EXPECT_FALSE(parse_plan_line(site_line(bad), diag));
  EXPECT_NE(diag.message.find("not hex"), std::string::npos) << diag.message;
}

// An import or a dir with no layer is refused with a message, never an exception out of the node program.
TEST(plan_lines, a_site_import_or_dir_without_its_layer_is_refused) {
  const auto line = site_line(a_site());
  for (const std::string_view key : {"{\"layer\":\"bbbb", "{\"local\":\"/home/me/proj\",\"layer\""}) {
    auto broken = line;
    const auto at = broken.find(key);
    ASSERT_NE(at, std::string::npos) << line;
    const auto layer = broken.find("\"layer\"", at);
    broken.replace(layer, 7, "\"la1er\"");
    diagnostics diag;
    EXPECT_FALSE(parse_plan_line(broken, diag)) << broken;
    EXPECT_NE(diag.message.find("site"), std::string::npos) << diag.message;
  }
}

TEST(plan_progress, a_site_comes_once_before_any_layer) {
  diagnostics diag;
  plan_progress first;
  ASSERT_EQ(*first.take(a_site(), diag), plan_progress::taken::site);
  ASSERT_NE(first.site(), nullptr);
  EXPECT_FALSE(first.take(a_site(), diag));
  plan_progress late;
  ASSERT_TRUE(late.take(line_of(0, "aa", 1), diag));
  EXPECT_FALSE(late.take(a_site(), diag));
}

}  // namespace
}  // namespace ferry::agent::node

namespace ferry::agent::node {
namespace {

plan_catalogue catalogue_ranked(const std::vector<std::pair<std::string, std::size_t>>& ids_and_ranks) {
  plan_catalogue c;
  for (std::size_t i = 0; i < ids_and_ranks.size(); ++i)
    c.layers.push_back({i, ids_and_ranks[i].first, "layer-" + ids_and_ranks[i].first, ids_and_ranks[i].second, {}, {}});
  c.workspace = 0;
  return c;
}

TEST(plan_progress, with_a_catalogue_its_rank_orders_the_queue_and_an_import_jumps_it) {
  plan_progress plan;
  diagnostics diag;
  // The workspace ranks first, then cc (imported first by earlier runs), then the rest.
  ASSERT_EQ(*plan.take(catalogue_ranked({{"aa", 0}, {"bb", 2}, {"cc", 1}, {"dd", 3}}), diag),
            plan_progress::taken::catalogue);
  ASSERT_NE(plan.catalogue(), nullptr);
  for (auto [i, id, size] : std::vector<std::tuple<std::size_t, std::string, std::uint64_t>>{
           {3, "dd", 40}, {1, "bb", 90}, {0, "aa", 5}})
    ASSERT_EQ(*plan.take(line_of(i, id, size), diag), plan_progress::taken::queued);
  EXPECT_EQ(plan.next()->id, "aa");  // rank, not size
  EXPECT_TRUE(plan.prefer("dd"));    // an import waits for dd
  EXPECT_FALSE(plan.prefer("aa"));   // handed out already
  EXPECT_TRUE(plan.prefer("cc"));    // not here yet: first in line when it comes
  EXPECT_TRUE(plan.prefer("bb"));
  EXPECT_TRUE(plan.prefer("dd"));    // asked again: keeps its place before bb
  EXPECT_EQ(plan.next()->id, "dd");
  ASSERT_EQ(*plan.take(line_of(2, "cc", 10), diag), plan_progress::taken::queued);
  EXPECT_EQ(plan.next()->id, "cc");  // asked before bb
  EXPECT_EQ(plan.next()->id, "bb");
  EXPECT_EQ(plan.next(), nullptr);
}

TEST(plan_progress, a_catalogue_after_a_layer_or_twice_is_refused_and_work_done_is_taken_anytime) {
  diagnostics diag;
  plan_progress twice;
  ASSERT_TRUE(twice.take(catalogue_ranked({{"aa", 0}}), diag));
  EXPECT_FALSE(twice.take(catalogue_ranked({{"aa", 0}}), diag));
  plan_progress late;
  ASSERT_TRUE(late.take(line_of(0, "aa", 1), diag));
  EXPECT_FALSE(late.take(catalogue_ranked({{"aa", 0}}), diag));
  plan_progress ended;
  ASSERT_TRUE(ended.take(line_of(0, "aa", 1), diag));
  ASSERT_EQ(*ended.take(plan_end{1, 0}, diag), plan_progress::taken::ended);
  EXPECT_EQ(*ended.take(plan_work_done{}, diag), plan_progress::taken::work_done);
}

TEST(plan_lines, a_catalogue_and_work_done_read_back_as_written_and_bad_names_are_refused) {
  plan_catalogue c;
  c.layers.push_back({0, std::string(64, 'a'), "workspace", 0, {"main", "app", "données"}, {}});
  c.layers.push_back({1, std::string(64, 'b'), "numpy", 2, {"numpy"}, {"numpy"}});
  c.layers.push_back({2, std::string(64, 'c'), "six", 1, {"six"}, {"six"}});
  c.workspace = 0;
  diagnostics diag;
  auto back = parse_plan_line(catalogue_line(c), diag);
  ASSERT_TRUE(back) << diag.message;
  const auto* got = std::get_if<plan_catalogue>(&*back);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->layers.size(), 3u);
  EXPECT_EQ(got->layers[1].name, "numpy");
  EXPECT_EQ(got->layers[1].rank, 2u);
  EXPECT_EQ(got->layers[0].modules, (std::vector<std::string>{"main", "app", "données"}));
  EXPECT_EQ(got->layers[2].dists, std::vector<std::string>{"six"});
  EXPECT_EQ(got->workspace, std::optional<std::size_t>(0));
  auto done = parse_plan_line(work_done_line(), diag);
  ASSERT_TRUE(done);
  EXPECT_TRUE(std::holds_alternative<plan_work_done>(*done));

  auto bad = c;
  bad.layers[1].modules.push_back("has space");
  EXPECT_FALSE(parse_plan_line(catalogue_line(bad), diag));
  EXPECT_NE(diag.message.find("numpy"), std::string::npos) << diag.message;
  bad = c;
  bad.layers[2].index = 5;
  EXPECT_FALSE(parse_plan_line(catalogue_line(bad), diag));
  bad = c;
  bad.workspace = 3;
  EXPECT_FALSE(parse_plan_line(catalogue_line(bad), diag));
  bad = c;
  bad.layers[0].id = "not hex";
  EXPECT_FALSE(parse_plan_line(catalogue_line(bad), diag));
}

}  // namespace
}  // namespace ferry::agent::node

namespace ferry::agent::node {
namespace {

TEST(plan_progress, while_an_asked_for_layer_is_on_its_way_the_others_wait_for_it) {
  plan_progress plan;
  diagnostics diag;
  ASSERT_TRUE(plan.take(line_of(0, "aa", 50), diag));
  ASSERT_TRUE(plan.take(line_of(1, "bb", 40), diag));
  ASSERT_TRUE(plan.take(line_of(2, "cc", 30), diag));
  EXPECT_FALSE(plan.held());
  EXPECT_TRUE(plan.prefer("cc"));
  const auto* first = plan.next();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->id, "cc");
  // cc is downloading for an import: aa and bb are held back, and a second worker gets nothing for now.
  EXPECT_TRUE(plan.held());
  EXPECT_EQ(plan.next(), nullptr);
  // Another import asks for bb: it goes, held for nothing.
  EXPECT_TRUE(plan.prefer("bb"));
  EXPECT_FALSE(plan.held());
  EXPECT_EQ(plan.next()->id, "bb");
  EXPECT_TRUE(plan.held());
  plan.finished(*first, layer_result{false, 30}, diag);
  EXPECT_TRUE(plan.held());  // bb still on its way
  plan.finished(layer("bb", 40), layer_result{false, 40}, diag);
  EXPECT_FALSE(plan.held());
  EXPECT_EQ(plan.next()->id, "aa");
}

TEST(plan_progress, a_lazy_plan_goes_on_past_a_failed_layer_and_reports_it_at_the_end) {
  plan_progress plan;
  plan.keep_going_after_failures();
  diagnostics diag;
  ASSERT_TRUE(plan.take(line_of(0, "ws", 10), diag));
  ASSERT_TRUE(plan.take(line_of(1, "broken", 30), diag));
  const auto* broken = plan.next();
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ(broken->id, "broken");
  const auto* ws = plan.next();
  ASSERT_NE(ws, nullptr);
  diagnostics failed_diag;
  failed_diag.set("layer layer-broken has the wrong SHA-256");
  plan.finished(*broken, make_error_code(errc::digest_mismatch), failed_diag);
  // The layer in progress, and those still to come, are not stopped by it.
  EXPECT_FALSE(plan.stopping());
  ASSERT_TRUE(plan.take(line_of(2, "later", 20), diag));
  const auto* later = plan.next();
  ASSERT_NE(later, nullptr);
  EXPECT_EQ(later->id, "later");
  plan.finished(*ws, layer_result{false, 100}, diag);
  plan.finished(*later, layer_result{true, 0}, diag);
  ASSERT_TRUE(plan.take(plan_end{3, 0}, diag));
  diagnostics out;
  const auto failure = plan.failure(out);
  ASSERT_TRUE(failure);
  EXPECT_EQ(*failure, errc::digest_mismatch);
  EXPECT_EQ(out.message, "layer layer-broken has the wrong SHA-256");
  const auto counts = plan.counts();
  EXPECT_EQ(counts.layers_fetched, 1u);
  EXPECT_EQ(counts.layers_cached, 1u);
}

}  // namespace
}  // namespace ferry::agent::node

namespace ferry::agent::node {
namespace {

// A layer of three shards of which only the first is in storage: its line, as ferry sends it at the first
// stored shard (plan.hpp).
layer_source streaming_layer() {
  layer_source l;
  l.id = "cc";
  l.name = "torch";
  for (char c : {'1', '2', '3'}) {
    shard_source s;
    s.files = 2;
    s.content = 1000;
    s.id = std::string(64, c);
    s.key = std::string("p/layers/") + c + ".zip";
    l.shards.push_back(s);
  }
  l.shards[0].url = "http://storage/1";
  l.shards[0].sha256 = std::string(64, 'a');
  l.shards[0].bytes = 400;
  return l;
}

plan_shard shard_line_of(std::size_t index, char digest) {
  return {"cc", index, fmt::format("http://storage/{}", index + 1), std::string(64, digest), 500};
}

// A layer line whose later shards are on their way reads back with them pending, and each shard line
// reads back as written; then the queued layer, the one a worker holds, gets each shard as its line comes.
TEST(plan_lines, a_layer_line_with_shards_to_come_and_its_shard_lines_read_back_as_written) {
  diagnostics diag;
  const auto line = layer_line(3, streaming_layer());
  auto parsed = parse_plan_line(line, diag);
  ASSERT_TRUE(parsed) << diag.message;
  const auto& placed = std::get<placed_layer>(*parsed);
  EXPECT_EQ(placed.index, 3u);
  ASSERT_EQ(placed.layer.shards.size(), 3u);
  EXPECT_TRUE(placed.layer.shards[0].stored());
  EXPECT_FALSE(placed.layer.shards[1].stored());
  EXPECT_EQ(placed.layer.shards[2].key, "p/layers/3.zip");
  EXPECT_EQ(content_bytes(placed.layer), 3000u);
  EXPECT_EQ(layer_line(3, placed.layer), line);

  const auto text = shard_line(shard_line_of(1, 'D'));
  auto shard = parse_plan_line(text, diag);
  ASSERT_TRUE(shard) << diag.message;
  const auto& s = std::get<plan_shard>(*shard);
  EXPECT_EQ(s.layer, "cc");
  EXPECT_EQ(s.index, 1u);
  EXPECT_EQ(s.url, "http://storage/2");
  EXPECT_EQ(s.sha256, std::string(64, 'd')) << "digests are read in lower case";
  EXPECT_EQ(s.bytes, 500u);

  plan_progress p;
  ASSERT_TRUE(p.take(std::move(*parsed), diag));
  const auto* held = p.next();
  ASSERT_NE(held, nullptr);
  EXPECT_FALSE(held->shards[1].stored());
  auto taken = p.take(std::move(*shard), diag);
  ASSERT_TRUE(taken) << diag.message;
  EXPECT_EQ(*taken, plan_progress::taken::shard);
  EXPECT_TRUE(held->shards[1].stored()) << "the worker's layer has the shard now";
  EXPECT_EQ(held->shards[1].url, "http://storage/2");
  EXPECT_FALSE(held->shards[2].stored());
  // Told again (the layer is at two places in the plan): nothing changes.
  EXPECT_EQ(*p.take(shard_line_of(1, 'e'), diag), plan_progress::taken::repeated);
  EXPECT_EQ(held->shards[1].sha256, std::string(64, 'd'));
  // The end line while shard 3 is still to come is refused: it never will.
  auto early_end = p.take(plan_end{4, std::nullopt}, diag);
  ASSERT_FALSE(early_end);
  EXPECT_EQ(diag.message, "the plan ended without shard 3 of layer torch");
  EXPECT_TRUE(p.stopping());
}

TEST(plan_progress, the_end_line_after_every_shard_line_ends_the_plan) {
  diagnostics diag;
  plan_progress p;
  ASSERT_TRUE(p.take(placed_layer{0, streaming_layer()}, diag));
  // A repeated layer line that knows shard 2 fills it in too.
  auto again = streaming_layer();
  again.shards[1].url = "http://storage/2";
  again.shards[1].sha256 = std::string(64, 'f');
  again.shards[1].bytes = 7;
  EXPECT_EQ(*p.take(placed_layer{1, again}, diag), plan_progress::taken::shard);
  EXPECT_EQ(*p.take(shard_line_of(2, 'a'), diag), plan_progress::taken::shard);
  const auto* l = p.next();
  ASSERT_NE(l, nullptr);
  for (const auto& s : l->shards) EXPECT_TRUE(s.stored());
  EXPECT_EQ(*p.take(plan_end{2, 0}, diag), plan_progress::taken::ended);
  p.finished(*l, layer_result{false, 1400}, diag);
  EXPECT_TRUE(p.environment(dir_of, diag)) << diag.message;
}

TEST(plan_lines, bad_shard_lines_and_layers_with_half_a_shard_are_refused) {
  diagnostics diag;
  const std::string a64(64, 'a');
  auto refused = [&](const std::string& line, std::string_view says) {
    diagnostics d;
    auto parsed = parse_plan_line(line, d);
    EXPECT_FALSE(parsed) << line;
    if (!parsed) {
      EXPECT_EQ(parsed.error(), errc::bad_plan);
    }
    EXPECT_NE(d.message.find(says), std::string::npos) << d.message;
  };
  refused(R"({"shard":{"layer":"cc","index":0,"url":"http://s/1","sha256":"xyz","bytes":1}})", "not a hex SHA-256");
  refused(R"({"shard":{"layer":"not hex","index":0,"url":"http://s/1","sha256":")" + a64 + R"(","bytes":1}})",
          "not hex");
  refused(R"({"shard":{"layer":"cc","index":0,"url":"","sha256":")" + a64 + R"(","bytes":1}})", "empty URL");
  refused(R"({"shard":{"layer":"cc","index":0,"url":"http://s/1\n","sha256":")" + a64 + R"(","bytes":1}})",
          "line break");
  refused(R"({"shard":{"layer":"cc","url":"http://s/1","sha256":")" + a64 + R"(","bytes":1}})", "lacks 'index'");
  refused(R"({"shard":{"layer":"cc","index":-1,"url":"http://s/1","sha256":")" + a64 + R"(","bytes":1}})",
          "not a count");
  // A shard in a layer line with a digest but no URL, or a URL but no digest.
  auto half = streaming_layer();
  half.shards[1].sha256 = a64;
  EXPECT_FALSE(check_layer(half, diag));
  EXPECT_EQ(diag.message, "shard 2 of layer torch has no URL, yet a digest or a size");
  refused(R"({"layer":{"index":0,"id":"cc","name":"x","shards":[{"url":"http://s/1","id":")" + a64 +
              R"(","files":1,"content":1}]}})",
          "lacks 'sha256'");
  // A whole plan (every layer at once) has no shard lines to come.
  environment_plan whole;
  whole.layers.push_back(streaming_layer());
  EXPECT_FALSE(check_plan(whole, diag));
  EXPECT_EQ(diag.message, "shard 2 of layer torch has no URL");

  plan_progress p;  // a shard line before its layer's, or for a shard the layer has not
  EXPECT_FALSE(p.take(shard_line_of(0, 'a'), diag));
  EXPECT_EQ(diag.message, "the plan's shard line for layer cc comes before the layer's line");
  EXPECT_TRUE(p.stopping());
  plan_progress q;
  ASSERT_TRUE(q.take(placed_layer{0, streaming_layer()}, diag));
  EXPECT_FALSE(q.take(shard_line_of(3, 'a'), diag));
  EXPECT_EQ(diag.message, "the plan's shard line names shard 4 of layer torch, which has 3");
}

}  // namespace
}  // namespace ferry::agent::node
