#include "agent/job/job.hpp"

#include "agent/provide/node_lease.hpp"

#include "agent/error.hpp"
#include "agent/pack/pack_summary.hpp"
#include "agent/cli/plural.hpp"
#include "agent/run/python_check.hpp"
#include "net/cancellation.hpp"
#include "net/fan_out.hpp"
#include "net/run_all.hpp"
#include "packaging/import_names.hpp"
#include "packaging/import_order.hpp"
#include "packaging/stored_manifest.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent {

namespace asio = boost::asio;

namespace {

// A layer as a node needs it: its shards behind presigned URLs (credentials never reach a node), each
// with the id this scan computed from the workstation's files, which the node checks what it inflates
// against: a zip's digest may come back from storage, and proves nothing about who wrote the zip.
layer_source source_of(const packaging::shipped_layer& l, const net::s3_client& s3, const std::string& bucket) {
  layer_source source;
  source.id = net::to_hex(l.packed->id);
  source.name = l.packed->name;
  for (const auto& s : l.shards) {
    // A shard not in storage yet gets its URL in its own line, when it is (shard_of).
    source.shards.push_back({s.stored() ? s3.presign_get(bucket, s.key) : std::string(), s.sha256, s.zip_bytes,
                             s.files, s.bytes, s.id, s.key, s.piece_path, s.piece_offset, s.file_size});
  }
  return source;
}

// A shard of a layer sent before, now in storage: its line for the nodes.
node::plan_shard shard_of(const packaging::layer& l, std::size_t index, const packaging::shipped_shard& s,
                          const net::s3_client& s3, const std::string& bucket) {
  return {net::to_hex(l.id), index, s3.presign_get(bucket, s.key), s.sha256, s.zip_bytes};
}

// Which layer is the command's working directory: the first of the workspace root's, in manifest order.
std::optional<std::size_t> workspace_of(const packaging::stored_manifest& m) {
  std::optional<std::size_t> workspace_root;
  for (const auto& r : m.roots) {
    if (r.kind == "workspace") workspace_root = r.index;
  }
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (workspace_root && m.layers[i].root == *workspace_root) return i;
  return std::nullopt;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The first layer of the workspace root (scan order is root order, so the workspace's come first).
std::optional<std::size_t> workspace_index(const packaging::scan_result& scan) {
  if (scan.layers.empty() || scan.layers.front().root_index != 0) return std::nullopt;
  return std::size_t{0};
}

// What a lazy start's nodes learn before any layer is in storage: every layer, its import names, its rank.
node::plan_catalogue catalogue_of(const packaging::scan_result& scan, const std::vector<std::size_t>& ranks,
                                  std::optional<std::size_t> workspace) {
  node::plan_catalogue c;
  c.workspace = workspace;
  for (std::size_t i = 0; i < scan.layers.size(); ++i) {
    const auto& l = scan.layers[i];
    auto names = packaging::import_names_of(l);
    c.layers.push_back({i, net::to_hex(l.id), l.name, i < ranks.size() ? ranks[i] : i, std::move(names.modules),
                        std::move(names.dists)});
  }
  return c;
}

// The shipped distributions that hold compiled extension modules: they need the packing interpreter's
// minor version, machine and platform.
std::vector<std::string> compiled_distributions(const std::vector<packaging::root_spec>& roots,
                                                const packaging::scan_result& scan) {
  std::vector<std::string> out;
  for (const auto& l : scan.layers) {
    if (l.root_index >= roots.size() || roots[l.root_index].type != packaging::root_spec::kind::site_packages)
      continue;
    const bool compiled = std::any_of(l.files.begin(), l.files.end(),
                                      [](const packaging::file_entry& f) { return f.path.ends_with(".so"); });
    if (compiled) out.push_back(l.name);
  }
  return out;
}

// The site plan with the scan's layers named by id, as the node program reads it.
node::plan_site site_of(const packaging::site_plan& site, const packaging::scan_result& scan) {
  auto id = [&](std::size_t i) { return net::to_hex(scan.layers[i].id); };
  node::plan_site out;
  out.hide_node_site = site.hide_node_site;
  for (const auto& slot : site.path) {
    node::site_path_entry e;
    e.raw = slot.raw;
    switch (slot.what) {
      case packaging::site_slot::kind::layers:
        e.what = node::site_path_entry::kind::layers;
        for (const auto i : slot.layers) e.ids.push_back(id(i));
        break;
      case packaging::site_slot::kind::stdlib: e.what = node::site_path_entry::kind::stdlib; break;
      case packaging::site_slot::kind::node_site: e.what = node::site_path_entry::kind::node_site; break;
      case packaging::site_slot::kind::raw: break;
    }
    out.path.push_back(std::move(e));
  }
  for (const auto& i : site.imports) out.imports.push_back({id(i.layer), i.file, i.line});
  for (const auto& d : site.dirs) out.dirs.push_back({d.local, id(d.layer)});
  return out;
}

}  // namespace

std::string startup_line(const startup_times& t, double ran, double total) {
  std::string nodes = t.nodes_new == 0 ? std::string("warm")
                                       : fmt::format("{} new{}", t.nodes_new,
                                                     t.nodes_warm ? fmt::format(", {} warm", t.nodes_warm) : "");
  std::string env = t.layers_fetched == 0 ? std::string("cached") : counted(t.layers_fetched, "layer");
  const auto first = t.first_line >= 0 ? fmt::format("; first line at {:.2f} s", t.first_line) : std::string();
  const auto after = t.work_end >= 0 ? fmt::format("; {:.2f} s after the work", std::max(0.0, total - t.work_end))
                                     : std::string();
  return fmt::format("ready in {:.2f} s{}: pack {:.2f} s ({}/{} cached), nodes {:.2f} s ({}), env {:.2f} s ({}){}; "
                     "ran {:.2f} s{}",
                     t.ready, t.lazy ? " (lazy start)" : "", t.pack, t.layers_cached, t.layers, t.nodes, nodes, t.env,
                     env, first, ran, after);
}

job::job(const command_context& ctx, tracing::action& act)
    : ctx_(ctx), act_(act), start_(std::chrono::steady_clock::now()), feed_(ctx.io) {}

job::~job() = default;

double job::since_start() const { return seconds(std::chrono::steady_clock::now() - start_); }

result<void> job::open(std::string_view provider, diagnostics& diag) {
  const auto& s = ctx_.config.values;
  if (ctx_.config.storage.unset()) {
    diag.set("storage.url is not set: nodes fetch the project from storage. Put storage.url = "
             "\"s3://BUCKET/PREFIX\" in ferry.toml or set FERRY_STORAGE_URL");
    return error_code(errc::no_storage);
  }
  auto storage = open_storage(ctx_, diag);
  if (!storage) return storage.error();
  storage_ = std::move(*storage);
  auto access = open_node_access(ctx_, diag);
  if (!access) return access.error();
  access_ = std::move(*access);
  auto p = provider_named(ctx_, *access_, provider, diag);
  if (!p) return p.error();
  provider_ = std::move(*p);
  pool_ = std::make_unique<node_pool>(ctx_, *access_, *provider_);
  // A team pool (pool.name) takes the place of private nodes; `ferry nodes` stays private.
  if (!s.pool.name.empty()) pool_->use_pool(*storage_->s3);
  materialise_ = materialise_options::from(s);
  auto program = shared_node_program(s.agent.node_program, diag);
  if (!program) return program.error();
  materialise_.program = std::move(*program);
  pool_->lease_files(materialise_.program, materialise_.cache_dir);
  return {};
}

asio::awaitable<void> job::pack_step(diagnostics& diag) {
  co_await net::accept_cancellation();
  auto act = act_.child(action_types::packaging::pack);
  // Each layer goes to the nodes the moment its first shard is in storage, and each later shard of it the
  // moment that one is. (open() made sure there is a storage.url.)
  const std::string& bucket = ctx_.config.storage.url.value().bucket;
  packaging::pack_progress progress;
  const packaging::scan_result* scanned = nullptr;
  progress.on_layer_shipped = [this, &bucket](const packaging::shipped_layer& l) {
    feed_.add(l.index, source_of(l, *storage_->s3, bucket));
  };
  progress.on_shard_shipped = [this, &bucket, &scanned](std::size_t layer, std::size_t shard,
                                                        const packaging::shipped_shard& s) {
    feed_.add_shard(shard_of(scanned->layers.at(layer), shard, s, *storage_->s3, bucket));
  };
  progress.on_scanned = [this, &scanned](const packaging::scan_result& scan, const std::vector<std::size_t>& ranks) {
    scanned = &scan;
    for (std::size_t i = 0; i < scan.layers.size(); ++i) layer_index_[net::to_hex(scan.layers[i].id)] = i;
    if (lazy_) feed_.catalogue(catalogue_of(scan, ranks, workspace_index(scan)));
  };
  progress_ = &progress;
  struct forget_progress {
    packaging::pack_progress*& p;
    ~forget_progress() { p = nullptr; }
  } forgetting{progress_};
  // On every way out the feed closes, an exception's too: no node may wait on it for ever.
  struct close_feed {
    layer_feed& feed;
    ~close_feed() { feed.abandon(); }  // after end(), a no-op
  } closer{feed_};
  pack_request request;
  request.on_site = [this](const pack_outcome& so_far, const packaging::scan_result& scan) {
    local_python_ = packaging::python_info_of(so_far.found);
    compiled_ = compiled_distributions(so_far.roots, scan);
    feed_.site(site_of(so_far.site, scan));
  };
  auto packed = co_await run_pack(act, ctx_, &*storage_, request, &progress, diag);
  times_.pack = since_start();
  packed_at_ = std::chrono::steady_clock::now();
  if (packed) {
    auto stored = packaging::parse_manifest(packed->report.manifest_text, diag);
    if (stored) {
      feed_.end(stored->layers.size(), workspace_of(*stored));
      times_.layers = packed->report.layers.size();
      times_.layers_cached = packed->layers_present;
      packed_ = std::move(*packed);
    } else {
      pack_error_ = stored.error();
    }
  } else {
    pack_error_ = packed.error();
  }
  if (pack_error_) {
    feed_.abandon();
    act.fail(pack_error_, diag);
  } else {
    act.succeed({{"layers", times_.layers}, {"cached", times_.layers_cached},
                 {"uploaded_bytes", packed_->report.uploaded_bytes}, {"manifest", packed_->report.manifest_key}});
  }
}

asio::awaitable<bool> job::under_lease(ready_node& node, environment& env) {
  if (node.lease_id.empty()) co_return true;
  diagnostics diag;
  auto set = co_await set_node_lease(act_, *node.link, *materialise_.program, materialise_.cache_dir, node.lease_id,
                                     node.lease_expires_at, diag);
  if (!set) {
    // Without the lease's file the node would refuse every command under it: no work here.
    if (set.error() != asio::error::operation_aborted)
      failures_.push_back(fmt::format("{}: {}", node.node.id, describe(set.error(), diag)));
    co_return false;
  }
  env.lease = node_lease_wrap{materialise_.program, materialise_.cache_dir, node.lease_id,
                              std::chrono::duration_cast<std::chrono::seconds>(ctx_.config.values.ssh.kill_grace)};
  co_return true;
}

asio::awaitable<bool> job::python_fits(ready_node& node, const environment& env) {
  if (python_.empty() || !local_python_) co_return true;
  auto act = act_.child(action_types::agent::python_check, {{"node", node.node.id}, {"python", python_}});
  diagnostics diag;
  auto got = co_await ask_node_python(act, *node.link, python_, env.workdir, diag);
  if (!got) {
    act.fail(got.error(), diag);
    if (got.error() != asio::error::operation_aborted)
      failures_.push_back(fmt::format("{}: {}", node.node.id, describe(got.error(), diag)));
    co_return false;
  }
  const auto where = fmt::format("{}'s {}", node.node.id, python_);
  const auto verdict = compare_python(*local_python_, *got, where, compiled_);
  if (verdict.what == python_verdict::kind::refuse) {
    diag.set(verdict.text);
    act.fail(make_error_code(errc::python_mismatch), diag);
    failures_.push_back(fmt::format("{}: {}", node.node.id, verdict.text));
    co_return false;
  }
  if (verdict.what == python_verdict::kind::warn && !python_warned_) {
    python_warned_ = true;  // one line a run, not one a node
    fmt::print(stderr, "ferry: warning: {}\n", verdict.text);
  }
  act.succeed({{"version", got->version}, {"implementation", got->implementation}, {"platform", got->platform},
               {"glibc", got->glibc}});
  co_return true;
}

void job::first_output() {
  if (times_.first_line < 0) times_.first_line = since_start();
}

void job::work_ended() { times_.work_end = std::max(times_.work_end, since_start()); }

double job::new_node_seconds() const {
  if (new_node_seconds_) return *new_node_seconds_;
  return std::chrono::duration<double>(ctx_.config.values.nodes.start_estimate).count();
}

void job::began_work(const std::string& node, std::chrono::steady_clock::time_point begin) {
  not_working_.erase(node);  // its work has begun: work_over() no longer stops it
  if (auto it = asked_.find(node); it != asked_.end()) {
    // From when it was asked for, or the pack's end if later: a node added mid-map finds the pack done.
    const auto from = packed_at_ ? std::max(it->second, *packed_at_) : it->second;
    const auto took = seconds(std::chrono::steady_clock::now() - from);
    new_node_seconds_ = new_node_seconds_ ? std::min(*new_node_seconds_, took) : took;
    asked_.erase(it);
  }
  const auto from = packed_at_ ? std::max(begin, *packed_at_) : begin;
  times_.env = std::max(times_.env, seconds(std::chrono::steady_clock::now() - from));
  times_.ready = std::max(times_.ready, since_start());
  if (times_.first_work < 0) times_.first_work = since_start();
  ++working_;
}

void job::hurry(const std::vector<std::string>& ids) {
  if (!progress_) return;  // the pack is over: every layer is in storage
  for (const auto& id : ids)
    if (auto it = layer_index_.find(id); it != layer_index_.end()) progress_->hurry(it->second);
}

materialise_options job::options_for(const ready_node& node) const {
  auto o = materialise_;
  o.tenant = node.tenant_user;
  return o;
}

void job::as_tenant(const ready_node& node, environment& env) const {
  if (!node.tenant_user.empty())
    env.runner = as_tenant_words(*materialise_.program, materialise_.cache_dir, node.tenant_user);
}

asio::awaitable<void> job::materialise_beside(ready_node& node, lazy_link& link, const fanout_role* fan,
                                              diagnostics& diag, std::optional<result<environment>>& out) {
  const auto options = options_for(node);
  out = co_await materialise_lazily(act_, *node.link, feed_, options, link, diag, fan);
  if (fanout_) fanout_->landed(node.node.id);
}

asio::awaitable<void> job::work_when_ready(ready_node& node, lazy_link& link) {
  // On every way out (an exception too) the node program is told the work is done: it ends then, and
  // the materialise beside this ends with it.
  struct done_at_end {
    layer_feed& feed;
    const std::string& node;
    ~done_at_end() { feed.work_done(node); }
  } done{feed_, node.node.id};
  const auto begin = std::chrono::steady_clock::now();
  co_await link.ready.wait();
  const bool stopped = co_await net::cancelled();  // (not in the condition: GCC 12 and co_await in &&)
  if (link.early && !stopped && !work_over_) {
    began_work(node.node.id, begin);
    as_tenant(node, *link.early);
    job_node jn{node, *link.early};
    if (co_await under_lease(node, *link.early) && co_await python_fits(node, *link.early)) co_await work_(jn);
  }
}

asio::awaitable<void> job::on_node_lazily(ready_node& node, const fanout_role* fan) {
  lazy_link link(co_await asio::this_coro::executor);
  link.on_wait = [this](const std::vector<std::string>& ids) { hurry(ids); };
  diagnostics diag;
  std::optional<result<environment>> env;
  std::vector<asio::awaitable<void>> both;
  both.push_back(materialise_beside(node, link, fan, diag, env));
  both.push_back(work_when_ready(node, link));
  co_await net::run_all(std::move(both));
  if (!env || !*env) {
    const auto ec = env ? env->error() : error_code(asio::error::operation_aborted);
    // A pack that failed says why itself; its nodes only saw their plan stop short.
    if (pack_error_) co_return;
    // Stopped because the job's work was over before it began here: nothing failed, whatever the node
    // program's last words were.
    const bool stopped = co_await net::cancelled();
    if (!link.early) {
      if (!(work_over_ && (stopped || ec == asio::error::operation_aborted)))
        failures_.push_back(fmt::format("{}: {}", node.node.id, describe(ec, diag)));
    } else if (ec != asio::error::operation_aborted) {
      // The command ran: what it imported was there, or it said so itself (an ImportError naming the layer).
      fmt::print(stderr, "ferry: warning: {}: the node program failed while the command ran: {}\n", node.node.id,
                 describe(ec, diag));
    }
    co_return;
  }
  times_.layers_fetched += (*env)->layers_fetched;
  imported_.push_back((*env)->imported);
}

asio::awaitable<void> job::store_import_order() {
  if (!packed_ || packed_->settings.import_order_key.empty() || imported_.empty()) co_return;
  std::vector<std::string> now;
  for (const auto& node : imported_) now = packaging::merge_import_order(now, node);
  if (now.empty()) co_return;  // no Python asked: nothing learned
  // What earlier runs imported stays behind this run's, as long as the project still has such a layer.
  std::vector<std::string> before;
  for (const auto& name : packed_->report.import_order) {
    const auto& layers = packed_->report.scan.layers;
    if (std::any_of(layers.begin(), layers.end(), [&](const packaging::layer& l) { return l.name == name; }))
      before.push_back(name);
  }
  const auto merged = packaging::merge_import_order(now, before);
  if (merged == packed_->report.import_order) co_return;
  const auto text = packaging::import_order_json(merged);
  diagnostics diag;
  auto put = co_await storage_->s3->put_object(act_, packed_->settings.bucket, packed_->settings.import_order_key,
                                               std::span<const char>(text.data(), text.size()), diag);
  // A hint for the next run: failing to store it fails nothing.
  act_.log(action_types::packaging::import_order,
           {{"key", packed_->settings.import_order_key}, {"layers", merged.size()}, {"stored", bool(put)}});
}

asio::awaitable<void> job::on_node(ready_node& node, std::chrono::steady_clock::time_point asked) {
  if (pack_error_) co_return;  // the pack failed: nothing to put on the node
  if (work_over_) co_return;   // nothing is left for it to do
  if (!node.warm) asked_[node.node.id] = asked;
  asio::cancellation_signal stop;
  not_working_[node.node.id] = &stop;
  struct forget {
    std::map<std::string, asio::cancellation_signal*>& nodes;
    const std::string& id;
    ~forget() { nodes.erase(id); }
  } forgetting{not_working_, node.node.id};
  co_await net::stoppable(steps_until_work_over(node), stop);
}

asio::awaitable<void> job::steps_until_work_over(ready_node& node) {
  if (fanout_) co_return co_await steps_and_serve(node);
  co_await node_steps(node, nullptr);
}

void job::work_over() {
  if (work_over_) return;
  work_over_ = true;
  act_.log(action_types::agent::work_over, {{"stopped", not_working_.size()}});
  // Emitting may end a node's steps at once, and they erase themselves from the map: a copy first.
  std::vector<asio::cancellation_signal*> stops;
  for (auto& [id, stop] : not_working_) stops.push_back(stop);
  not_working_.clear();
  for (auto* stop : stops) stop->emit(asio::cancellation_type::total);
  if (fanout_) fanout_->work_over();
}

asio::awaitable<void> job::steps_then_flag(ready_node& node, const fanout_role* fan, bool& over) {
  co_await net::accept_cancellation();
  co_await node_steps(node, fan);
  over = true;
  if (fanout_) fanout_->steps_ended(node.node.id);
}

asio::awaitable<void> job::steps_and_serve(ready_node& node) {
  const auto arrival = fanout_->arrive(node.node);
  bool over = false;
  std::vector<asio::awaitable<void>> parts;
  parts.push_back(steps_then_flag(node, &arrival.role, over));
  if (arrival.serves) parts.push_back(fanout_->serve(act_, node, materialise_, over));
  if (arrival.held) parts.push_back(fanout_->stop_holding_after_limit(node.node.id));
  co_await net::run_all(std::move(parts));
}

asio::awaitable<void> job::node_steps(ready_node& node, const fanout_role* fan) {
  if (lazy_) co_return co_await on_node_lazily(node, fan);
  diagnostics diag;
  const auto begin = std::chrono::steady_clock::now();
  const auto options = options_for(node);
  auto env = co_await materialise(act_, *node.link, feed_, options, diag, fan);
  if (fanout_) fanout_->landed(node.node.id);
  if (!env) {
    // A pack that failed says why itself; its nodes only saw their plan stop short.
    const bool cancelled = co_await net::cancelled();
    const bool stopped = work_over_ && (cancelled || env.error() == asio::error::operation_aborted);  // nothing failed
    if (!pack_error_ && !stopped) failures_.push_back(fmt::format("{}: {}", node.node.id, describe(env.error(), diag)));
    co_return;
  }
  // A job cancelled while the layers landed starts no work here (a cancellation that reached the last
  // step of materialise may leave it a success).
  if (co_await net::cancelled()) co_return;
  if (work_over_) co_return;
  // What the environment cost beyond the pack and the node: from the later of the two to its end.
  began_work(node.node.id, begin);
  times_.layers_fetched += env->layers_fetched;
  as_tenant(node, *env);
  job_node jn{node, *env};
  if (co_await under_lease(node, *env) && co_await python_fits(node, *env)) co_await work_(jn);
}

asio::awaitable<void> job::provide(std::size_t count) {
  co_await net::accept_cancellation();
  auto report = co_await pool_->run_on_nodes(act_, count, [this](ready_node& n) { return on_node(n, start_); });
  times_.nodes = seconds(report.until_ready);
  times_.nodes_new += report.created;
  times_.nodes_warm += report.warm;
  failures_.insert(failures_.end(), report.failures.begin(), report.failures.end());
}

asio::awaitable<void> job::add_nodes(std::size_t count) {
  const auto asked = std::chrono::steady_clock::now();
  auto report = co_await pool_->add_nodes(act_, count, [this, asked](ready_node& n) { return on_node(n, asked); });
  times_.nodes_new += report.created;
  times_.nodes_warm += report.warm;
  failures_.insert(failures_.end(), report.failures.begin(), report.failures.end());
}

asio::awaitable<result<void>> job::pack_or_fail() {
  co_await pack_step(pack_diag_);
  if (pack_error_) co_return pack_error_;
  co_return result<void>{};
}

asio::awaitable<result<void>> job::provide_all(std::size_t count) {
  co_await provide(count);
  co_return result<void>{};
}

asio::awaitable<result<void>> job::run(std::size_t count, job_work work, diagnostics& diag) {
  work_ = std::move(work);
  if (job_fanout::wanted(ctx_.config.values.nodes, count)) fanout_.emplace(ctx_.config.values.nodes, count, feed_);
  times_.lazy = lazy_;
  // A pack that failed ends the provisioning too: its nodes would have nothing to run, and waiting for
  // them could take up to nodes.ready_timeout, with machines started meanwhile.
  diagnostics ignored;  // the pack keeps its own diagnostics
  co_await net::fan_out(
      2, 2, [this, count](std::size_t i, diagnostics&) { return i == 0 ? pack_or_fail() : provide_all(count); },
      ignored);
  if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
  if (pack_error_) {
    diag = pack_diag_;
    co_return pack_error_;
  }
  co_await store_import_order();
  if (packed_) co_await say_first_pack(ctx_, *packed_);
  if (working_ == 0) {
    std::string why;
    for (const auto& f : failures_) why += "\n  " + f;
    diag.set(fmt::format("no node could run the work:{}", why.empty() ? std::string(" none was provided") : why));
    co_return error_code(errc::no_nodes);
  }
  co_return result<void>{};
}

}  // namespace ferry::agent
