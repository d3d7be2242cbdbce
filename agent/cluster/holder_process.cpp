#include "agent/cluster/holder_process.hpp"

#include "agent/error.hpp"
#include "net/cancellation.hpp"
#include "net/child_process.hpp"
#include "provision/file_lock.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <csignal>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern char** environ;

namespace ferry::agent {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

// Waits `d` (a poll's pause); a cancelled wait just ends early.
asio::awaitable<void> pause(asio::steady_timer& timer, std::chrono::milliseconds d) {
  timer.expires_after(d);
  error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

// How long a holder may take to wind down after SIGTERM: its grace for the remote processes, twice over.
clock::duration stop_limit(const command_context& ctx) {
  const auto& v = ctx.config.values;
  return 2 * (v.agent.shutdown_grace + v.ssh.kill_grace + v.ssh.connect_timeout) + std::chrono::seconds(5);
}

// Stops a holder: SIGTERM, then SIGKILL when it does not end in time. False when it had to be killed.
asio::awaitable<bool> stop_holder(const command_context& ctx, const cluster_record& r) {
  if (!holder_alive(r)) co_return true;
  ::kill(r.pid, SIGTERM);
  asio::steady_timer timer(ctx.io);
  const auto deadline = clock::now() + stop_limit(ctx);
  while (holder_alive(r) && clock::now() < deadline) co_await pause(timer, std::chrono::milliseconds(50));
  if (!holder_alive(r)) co_return true;
  ::kill(r.pid, SIGKILL);
  co_return false;
}

// The holder's command line: this binary, the same configuration file, a trace file of its own beside
// this command's when it names one.
std::vector<std::string> holder_argv(const command_context& ctx, const cluster_wanted& wanted) {
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> argv{ec ? std::string("ferry") : self.string()};
  if (!ctx.options.config_file.empty()) argv.insert(argv.end(), {"--config", ctx.options.config_file});
  if (!ctx.options.trace_file.empty()) {
    fs::path t(ctx.options.trace_file);
    argv.insert(argv.end(), {"--trace", (t.parent_path() / (t.stem().string() + ".cluster-" + wanted.name + ".jsonl")).string()});
  }
  argv.insert(argv.end(), {"cluster", "hold", "--name", wanted.name, "--nodes", std::to_string(wanted.nodes), "--provider",
                           ctx.config.values.nodes.provider});
  return argv;
}

// Starts the holder detached (its own session, adopted by init when the shell around it exits), its
// output appended to `log`; returns its pid.
asio::awaitable<result<int>> launch_holder(const command_context& ctx, tracing::action& act,
                                           const std::vector<std::string>& holder, const fs::path& log,
                                           diagnostics& diag) {
  net::child_request request;
  request.argv = {"/bin/sh", "-c", R"(log=$1; shift; setsid "$0" "$@" </dev/null >>"$log" 2>&1 & echo $!)",
                  holder.front(), log.string()};
  request.argv.insert(request.argv.end(), holder.begin() + 1, holder.end());
  request.timeout = ctx.config.values.nodes.local_command_timeout;
  request.after_exit = net::leftovers::keep;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (!std::string_view(*e).starts_with("FERRY_TASK_ID=")) env.emplace_back(*e);
  env.push_back("FERRY_TASK_ID=" + act.serialize_task_id());
  request.environment = std::move(env);
  auto ran = co_await net::run_child(request, diag);
  if (!ran) co_return ran.error();
  int pid = 0;
  const auto& out = ran->out;
  std::from_chars(out.data(), out.data() + out.size(), pid);
  if (pid <= 0) {
    diag.set(fmt::format("starting the cluster's holder printed no pid: {}", ran->err));
    co_return make_error_code(errc::cluster_failed);
  }
  co_return pid;
}

std::string log_tail(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::size_t shown = 2000;
  return text.size() > shown ? "..." + text.substr(text.size() - shown) : text;
}

// Waits until the holder says ready or failed, or is gone. A Ctrl-C meanwhile stops it.
asio::awaitable<result<cluster_record>> await_ready(const command_context& ctx, const std::string& name,
                                                    const cluster_record& launched, diagnostics& diag) {
  const auto& v = ctx.config.values;
  const auto deadline = clock::now() + v.nodes.ready_timeout + v.agent.cluster_start_timeout + std::chrono::seconds(30);
  const auto dir = clusters_dir(v.dirs.state);
  asio::steady_timer timer(ctx.io);
  for (;;) {
    diagnostics d;
    auto r = read_record(dir, name, d);
    if (r && *r && (*r)->pid == launched.pid) {
      if ((*r)->status == "ready") co_return std::move(**r);
      if ((*r)->status == "failed") {
        diag.set(fmt::format("cluster {}: {}", name, (*r)->error));
        // It is winding down: its remote processes are stopped before this says it failed.
        const auto limit = clock::now() + stop_limit(ctx);
        while (holder_alive(launched) && clock::now() < limit) co_await pause(timer, std::chrono::milliseconds(50));
        remove_record(dir, name, launched.pid);
        co_return make_error_code(errc::cluster_failed);
      }
    }
    if (!holder_alive(launched)) {
      diag.set(fmt::format("cluster {}: its holder ended before the cluster was ready; its log ({}):\n{}", name,
                           launched.log, log_tail(launched.log)));
      remove_record(dir, name, launched.pid);
      co_return make_error_code(errc::cluster_failed);
    }
    if (clock::now() >= deadline) {
      co_await stop_holder(ctx, launched);
      diag.set(fmt::format("cluster {}: not ready in time; its log ({}):\n{}", name, launched.log,
                           log_tail(launched.log)));
      co_return make_error_code(errc::cluster_failed);
    }
    co_await pause(timer, std::chrono::milliseconds(50));
    if (co_await net::cancelled()) {
      co_await asio::this_coro::reset_cancellation_state();
      co_await stop_holder(ctx, launched);
      co_return asio::error::operation_aborted;
    }
  }
}

}  // namespace

asio::awaitable<result<cluster_record>> bring_up_cluster(const command_context& ctx, tracing::action& act,
                                                         const cluster_wanted& wanted, bool& reused,
                                                         diagnostics& diag) {
  if (!valid_cluster_name(wanted.name)) {
    diag.set(fmt::format("--name {}: use letters, digits, '-', '_' and '.' (at most 64)", wanted.name));
    co_return make_error_code(errc::cluster_failed);
  }
  if (wanted.engine != "dask") {
    diag.set(fmt::format("--engine {}: ferry runs dask clusters", wanted.engine));
    co_return make_error_code(errc::cluster_failed);
  }
  const auto dir = clusters_dir(ctx.config.values.dirs.state);
  cluster_record launched;
  {
    // One `up` at a time decides whether to start a holder; the next sees its record.
    auto lock = co_await provision::lock_file(dir / ".lock", ctx.config.values.nodes.registry_lock_timeout, diag);
    if (!lock) co_return lock.error();
    auto existing = read_record(dir, wanted.name, diag);
    if (!existing) co_return existing.error();
    // One that is going away is waited for, then replaced by a new one.
    if (*existing && holder_alive(**existing) && ((*existing)->status == "stopping" || (*existing)->status == "stopped")) {
      if (!co_await stop_holder(ctx, **existing)) {
        diag.set(fmt::format("cluster {}: the holder that was stopping (pid {}) had to be killed", wanted.name,
                             (*existing)->pid));
        co_return make_error_code(errc::cluster_failed);
      }
      *existing = std::nullopt;
    }
    if (*existing && holder_alive(**existing) && (*existing)->status != "failed") {
      launched = std::move(**existing);
      reused = launched.status == "ready";
      if (reused) co_return launched;
    } else {
      if (*existing) remove_record(dir, wanted.name, (*existing)->pid);
      launched.name = wanted.name;
      launched.status = "starting";
      launched.wanted = wanted.nodes;
      launched.log = (dir / (wanted.name + ".log")).string();
      fs::create_directories(dir);
      std::error_code ec;
      fs::remove(launched.log, ec);
      auto pid = co_await launch_holder(ctx, act, holder_argv(ctx, wanted), launched.log, diag);
      if (!pid) co_return pid.error();
      launched.pid = *pid;
      launched.pid_start = process_start(*pid);
      launched.started_at = static_cast<std::int64_t>(std::time(nullptr));
      // Written here too, under the lock: until the holder writes its own, the next `up` must see this one.
      auto read_again = read_record(dir, wanted.name, diag);
      if (read_again && !*read_again) {
        if (auto w = write_record(dir, launched, diag); !w) co_return w.error();
      }
    }
  }
  co_return co_await await_ready(ctx, wanted.name, launched, diag);
}

asio::awaitable<stopped_holder> stop_cluster_holder(const command_context& ctx, const cluster_record& r) {
  stopped_holder stopped;
  stopped.clean = co_await stop_holder(ctx, r);
  const auto dir = clusters_dir(ctx.config.values.dirs.state);
  diagnostics ignored;
  auto last = read_record(dir, r.name, ignored);
  stopped.last = last && *last && (*last)->pid == r.pid ? std::move(**last) : r;
  remove_record(dir, r.name, r.pid);
  co_return stopped;
}

}  // namespace ferry::agent
