#include "agent/materialise/materialise.hpp"

#include "agent/error.hpp"
#include "agent/materialise/node_call.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <boost/json/object.hpp>

#include <algorithm>
#include <chrono>

namespace ferry::agent {
namespace {

namespace json = boost::json;

// `layers`: the plan's count, which the node's python_path must match; none for a lazy start, whose end
// says what was imported instead.
result<environment> environment_of(const node_answer& answer, std::optional<std::size_t> layers, diagnostics& diag) {
  environment env;
  env.workdir = end_text(answer, "workdir");
  if (const auto* path = answer.end->if_contains("python_path"); path && path->is_array()) {
    for (const auto& p : path->get_array())
      if (p.is_string()) env.python_path.emplace_back(p.get_string());
  }
  if (const auto* imported = answer.end->if_contains("imported"); imported && imported->is_array()) {
    for (const auto& p : imported->get_array())
      if (p.is_string()) env.imported.emplace_back(p.get_string());
  }
  env.layers_left = end_count(answer, "layers_left");
  env.hook_dir = end_text(answer, "hook_dir");
  env.site_file = end_text(answer, "site_file");
  if (layers && env.python_path.size() != *layers) {
    diag.set(fmt::format("the node program reported {} layer directories for a plan of {}", env.python_path.size(),
                         *layers));
    return make_error_code(errc::materialise_failed);
  }
  env.layers_cached = end_count(answer, "layers_cached");
  env.layers_fetched = end_count(answer, "layers_fetched");
  env.bytes_fetched = end_count(answer, "bytes_fetched");
  env.layers_evicted = end_count(answer, "layers_evicted");
  return env;
}

// What a lazy start's node program says as it goes: where the command may start, and which layers an
// import waits for.
void observe(lazy_link& link, std::chrono::steady_clock::time_point begin, const json::object& message) {
  const auto* type = message.if_contains("message_type");
  if (!type) type = message.if_contains("action_type");
  if (!type || !type->is_string()) return;
  const std::string_view t = type->get_string();
  auto text = [&](std::string_view key) {
    const auto* v = message.if_contains(key);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  if (t == action_types::node::may_start && !link.early) {
    environment env;
    env.workdir = text("workdir");
    // The hook's directory first, then every layer's, landed or not (the hook waits for the rest).
    env.python_path = {text("hook_dir")};
    if (const auto* path = message.if_contains("python_path"); path && path->is_array())
      for (const auto& p : path->get_array())
        if (p.is_string()) env.python_path.emplace_back(p.get_string());
    env.import_socket = text("socket");
    env.hook_dir = text("hook_dir");
    env.site_file = text("site_file");
    link.early = std::move(env);
    link.may_start_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    link.ready.set();
  } else if (t == action_types::node::import_wait && text("action_status") == "started" && link.on_wait) {
    std::vector<std::string> ids;
    if (const auto* v = message.if_contains("ids"); v && v->is_array())
      for (const auto& id : v->get_array())
        if (id.is_string()) ids.emplace_back(id.get_string());
    link.on_wait(ids);
  }
}

asio::awaitable<result<environment>> materialise_from(tracing::action& parent, net::node_link& link,
                                                      layer_feed& feed, const materialise_options& options,
                                                      lazy_link* lazy, const fanout_role* fan, diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  const auto node_name = link.node();
  auto act = parent.child(action_types::agent::materialise, {{"node", node_name}});
  auto fail = [&](error_code ec) {
    act.fail(ec, diag);
    return result<environment>(boost::system::in_place_error, ec);
  };
  node_call call{options.program, options.cache_dir, options.node_path, "materialise",
                 action_types::node::materialise, {}};
  if (lazy) {
    call.on_message = [lazy, begin = std::chrono::steady_clock::now()](const json::object& m) {
      observe(*lazy, begin, m);
    };
  }
  // While the feed is open, exec waits for its lines without watching the command: a node that lacks the
  // program would only be found out when the pack ends. So then the program is made sure of first.
  if (!feed.ended()) {
    if (auto present = co_await ensure_node_program(act, link, call, diag); !present)
      co_return fail(present.error());
  }
  auto trace = node_trace(act, node_name);
  node::plan_header header{options.cache_dir, options.cache_cap, {}, options.limits, lazy != nullptr};
  header.tenant = options.tenant;
  if (fan) {
    header.peer_token = fan->token;
    header.serve_id = fan->serve_id;
  }
  auto answer = co_await call_node(
      act, link, call,
      [&](const std::string& task_id) {
        header.task_id = task_id;
        return feed.reader(node::header_line(header), node_name, lazy != nullptr);
      },
      *trace, diag);
  if (!answer) co_return fail(answer.error());
  if (!answer->succeeded())
    co_return fail(node_failure(*answer, node_name, make_error_code(errc::materialise_failed), diag));
  auto env = environment_of(*answer, lazy ? std::nullopt : std::optional<std::size_t>(feed.layers()), diag);
  if (!env) co_return fail(env.error());
  act.succeed({{"workdir", env->workdir},
               {"layers_cached", env->layers_cached},
               {"layers_fetched", env->layers_fetched},
               {"bytes_fetched", env->bytes_fetched},
               {"layers_evicted", env->layers_evicted},
               {"layers_left", env->layers_left}});
  co_return std::move(*env);
}


}  // namespace

materialise_options materialise_options::from(const config::settings& settings) {
  materialise_options o;
  auto& l = o.limits;
  l = limits_of(settings);
  l.parallelism = std::max(1, settings.agent.download_parallelism);
  l.range_size = std::max<std::uint64_t>(settings.agent.download_range.bytes, 64 << 10);
  l.max_shard_content = settings.agent.max_shard_content.bytes;
  o.cache_cap = settings.nodes.cache_size.bytes;
  return o;
}

asio::awaitable<result<environment>> materialise(tracing::action& parent, net::node_link& link,
                                                 const environment_plan& plan, const materialise_options& options,
                                                 diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  if (auto checked = node::check_plan(plan, diag); !checked) {
    auto act = parent.child(action_types::agent::materialise,
                            {{"node", link.node()}, {"layers", plan.layers.size()}});
    act.fail(checked.error(), diag);
    co_return checked.error();
  }
  auto feed = layer_feed::of(co_await asio::this_coro::executor, plan);
  auto o = options;
  o.cache_dir = plan.cache_dir;
  o.cache_cap = plan.cache_cap;
  co_return co_await materialise(parent, link, *feed, o, diag);
}

asio::awaitable<result<environment>> materialise(tracing::action& parent, net::node_link& link,
                                                 layer_feed& feed, const materialise_options& options,
                                                 diagnostics& diag, const fanout_role* fan) {
  co_return co_await materialise_from(parent, link, feed, options, nullptr, fan, diag);
}

asio::awaitable<result<environment>> materialise_lazily(tracing::action& parent, net::node_link& link,
                                                        layer_feed& feed, const materialise_options& options,
                                                        lazy_link& lazy, diagnostics& diag, const fanout_role* fan) {
  struct tell_at_end {
    lazy_link& link;
    ~tell_at_end() { link.ready.set(); }  // a waiting work goes on, with or without an environment
  } teller{lazy};
  co_return co_await materialise_from(parent, link, feed, options, &lazy, fan, diag);
}

}  // namespace ferry::agent
