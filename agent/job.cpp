#include "agent/job.hpp"

#include "agent/error.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "packaging/stored_manifest.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent {

namespace asio = boost::asio;

namespace {

// The manifest as a node needs it: each layer's shards behind presigned URLs (credentials never reach a
// node), in sys.path order, and which layer is the working directory.
environment_plan plan_of(const packaging::stored_manifest& m, const net::s3_client& s3, const std::string& bucket,
                         std::uint64_t cache_cap) {
  environment_plan plan;
  plan.cache_cap = cache_cap;
  std::optional<std::size_t> workspace_root;
  for (const auto& r : m.roots) {
    if (r.kind == "workspace") workspace_root = r.index;
  }
  for (const auto& l : m.layers) {
    layer_source source;
    source.id = l.id;
    source.name = l.name;
    for (const auto& s : l.shards) {
      source.shards.push_back({s3.presign_get(bucket, s.key), s.sha256, s.zip_bytes, s.files, s.bytes});
    }
    if (workspace_root && l.root == *workspace_root && !plan.workspace) plan.workspace = plan.layers.size();
    plan.layers.push_back(std::move(source));
  }
  return plan;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::string startup_line(const startup_times& t, double ran) {
  std::string nodes = t.nodes_new == 0 ? std::string("warm")
                                       : fmt::format("{} new{}", t.nodes_new,
                                                     t.nodes_warm ? fmt::format(", {} warm", t.nodes_warm) : "");
  std::string env = t.layers_fetched == 0 ? std::string("cached") : fmt::format("{} layers", t.layers_fetched);
  return fmt::format("ready in {:.2f} s: pack {:.2f} s ({}/{} cached), nodes {:.2f} s ({}), env {:.2f} s ({}); "
                     "ran {:.2f} s",
                     t.ready, t.pack, t.layers_cached, t.layers, t.nodes, nodes, t.env, env, ran);
}

job::job(const command_context& ctx, tracing::action& act)
    : ctx_(ctx), act_(act), start_(std::chrono::steady_clock::now()), packed_event_(ctx.io) {}

job::~job() = default;

double job::since_start() const { return seconds(std::chrono::steady_clock::now() - start_); }

result<void> job::open(std::string_view provider, diagnostics& diag) {
  const auto& s = ctx_.config.values;
  if (s.storage.url.empty()) {
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
  materialise_ = materialise_options::from(s);
  auto program = load_node_program(s.agent.node_program, diag);
  if (!program) return program.error();
  materialise_.program = std::move(*program);
  return {};
}

asio::awaitable<void> job::pack_step(diagnostics& diag) {
  co_await net::accept_cancellation();
  auto act = act_.child("ferry:pack");
  auto packed = co_await run_pack(act, ctx_, &*storage_, pack_request{}, nullptr, diag);
  times_.pack = since_start();
  if (packed) {
    auto stored = packaging::parse_manifest(packed->report.manifest_text, diag);
    if (stored) {
      plan_ = plan_of(*stored, *storage_->s3, packed->settings.bucket, ctx_.config.values.nodes.cache_size.bytes);
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
    act.fail(pack_error_, diag);
  } else {
    act.succeed({{"layers", times_.layers}, {"cached", times_.layers_cached},
                 {"uploaded_bytes", packed_->report.uploaded_bytes}, {"manifest", packed_->report.manifest_key}});
  }
  packed_event_.set();
}

asio::awaitable<void> job::on_node(ready_node& node) {
  if (auto ec = co_await packed_event_.wait(); ec || !packed_) co_return;
  diagnostics diag;
  const auto begin = std::chrono::steady_clock::now();
  auto env = co_await materialise(act_, *node.session, plan_, materialise_, diag);
  if (!env) {
    failures_.push_back(fmt::format("{}: {}", node.node.id, describe(env.error(), diag)));
    co_return;
  }
  times_.env = std::max(times_.env, seconds(std::chrono::steady_clock::now() - begin));
  times_.layers_fetched += env->layers_fetched;
  times_.ready = std::max(times_.ready, since_start());
  ++working_;
  job_node jn{node, *env};
  co_await work_(jn);
}

asio::awaitable<void> job::provide(std::size_t count) {
  co_await net::accept_cancellation();
  auto report = co_await pool_->run_on_nodes(act_, count, [this](ready_node& n) { return on_node(n); });
  times_.nodes = seconds(report.until_ready);
  times_.nodes_new += report.created;
  times_.nodes_warm += report.warm;
  failures_.insert(failures_.end(), report.failures.begin(), report.failures.end());
}

asio::awaitable<void> job::add_nodes(std::size_t count) {
  auto report = co_await pool_->add_nodes(act_, count, [this](ready_node& n) { return on_node(n); });
  times_.nodes_new += report.created;
  times_.nodes_warm += report.warm;
  failures_.insert(failures_.end(), report.failures.begin(), report.failures.end());
}

asio::awaitable<result<void>> job::run(std::size_t count, job_work work, diagnostics& diag) {
  work_ = std::move(work);
  std::vector<asio::awaitable<void>> steps;
  steps.push_back(pack_step(pack_diag_));
  steps.push_back(provide(count));
  co_await net::run_all(std::move(steps));
  if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
  if (pack_error_) {
    diag = pack_diag_;
    co_return pack_error_;
  }
  if (working_ == 0) {
    std::string why;
    for (const auto& f : failures_) why += "\n  " + f;
    diag.set(fmt::format("no node could run the work:{}", why.empty() ? std::string(" none was provided") : why));
    co_return error_code(errc::no_nodes);
  }
  co_return result<void>{};
}

}  // namespace ferry::agent
