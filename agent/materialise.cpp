#include "agent/materialise.hpp"

#include "agent/materialise_progress.hpp"
#include "agent/materialise_trace.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_streams.hpp"

#include <boost/asio/this_coro.hpp>

#include <algorithm>

namespace ferry::agent {
namespace {

// Feeds the script's stdout to the parser and its events to the trace as they arrive; keeps the tail
// of its stderr for the error text.
class progress_sink final : public net::output_sink {
 public:
  static constexpr std::size_t max_stderr = 16 * 1024;

  explicit progress_sink(materialise_trace& trace) : trace_(trace) {}

  asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override {
    const std::string_view text(bytes.data(), bytes.size());
    if (stream == net::output_stream::err) {
      err.append(text);
      if (err.size() > 2 * max_stderr) err.erase(0, err.size() - max_stderr);
      co_return error_code{};
    }
    for (const auto& e : parser_.feed(text)) trace_.on(e);
    co_return error_code{};
  }

  // The end of the stream: a last line cut short is reported too.
  void finish() {
    for (const auto& e : parser_.finish()) trace_.on(e);
  }

  std::string err;

 private:
  materialise_trace& trace_;
  progress_parser parser_;
};

environment environment_of(const environment_plan& plan, const materialise_trace& progress) {
  environment env;
  env.workdir = progress.workdir();
  for (const auto& layer : plan.layers) env.python_path.push_back(progress.cache_dir() + "/layers/" + layer.id);
  env.layers_cached = progress.layers_cached();
  env.layers_fetched = progress.layers_fetched();
  env.bytes_fetched = progress.bytes_fetched();
  env.layers_evicted = progress.layers_evicted();
  return env;
}

}  // namespace

materialise_options materialise_options::from(const config::settings& settings) {
  materialise_options o;
  o.connect_timeout = settings.net.connect_timeout;
  o.download_timeout = settings.agent.download_timeout;
  o.download_attempts = std::max(1, settings.net.retry.max_attempts);
  o.lock_timeout = settings.agent.cache_lock_timeout;
  o.parallelism = std::max(1, settings.agent.download_parallelism);
  return o;
}

asio::awaitable<result<environment>> materialise(tracing::action& parent, net::ssh_session& session,
                                                 const environment_plan& plan, const materialise_options& options,
                                                 diagnostics& diag) {
  co_await asio::this_coro::throw_if_cancelled(false);
  const auto node = session.peer().node;
  auto act = parent.child("ferry:materialise", {{"node", node}, {"layers", plan.layers.size()}});
  if (auto checked = check_plan(plan, diag); !checked) {
    act.fail(checked.error(), diag);
    co_return result<environment>(boost::system::in_place_error, checked.error());
  }
  const auto script = materialise_script(plan, options);
  materialise_trace progress(act, plan, node);
  progress_sink sink(progress);
  net::buffer_source input(script);
  net::exec_request request{options.shell_command, &input, &sink};
  auto done = co_await net::exec(act, session, request, diag);
  sink.finish();
  error_code ec;
  if (!done) {
    ec = done.error();
  } else if (!done->success() || !progress.ready()) {
    ec = progress.failure(*done, sink.err, diag);
  }
  if (ec) {
    progress.abandon(ec, diag);
    act.fail(ec, diag);
    co_return result<environment>(boost::system::in_place_error, ec);
  }
  auto env = environment_of(plan, progress);
  act.succeed({{"workdir", env.workdir},
               {"layers_cached", env.layers_cached},
               {"layers_fetched", env.layers_fetched},
               {"bytes_fetched", env.bytes_fetched},
               {"layers_evicted", env.layers_evicted}});
  co_return env;
}

}  // namespace ferry::agent
