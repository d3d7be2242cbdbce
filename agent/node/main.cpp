// ferry-node: the node half of the agent. One static program that ferry puts on each node (checked by
// its SHA-256, kept in the node's cache under that digest), so a node needs nothing installed but `sh` to
// start it. It reads a JSON plan on stdin and writes Eliot messages on stdout that continue ferry's task.
//
//   ferry-node materialise         the plan's layers into the node's layer cache as its lines arrive
//                                  (plan.hpp, materialise_layers.hpp); for a lazy plan, the command's
//                                  import hook served meanwhile (import_gate.hpp, import_server.hpp)
//   ferry-node serve               this job's shards to the job's other nodes, until stdin ends (fan-out:
//                                  peer_server.hpp)
//   ferry-node stage               the staging plan's objects into a node directory (stage_plan.hpp,
//                                  stage_objects.hpp)
//   ferry-node watchdog            the node's idle watchdog started, replaced or stopped (idle_watchdog.hpp)
//   ferry-node watchdog-loop DIR   the watchdog itself, detached
//   ferry-node lease-run FILE [--grace SECONDS] -- ARGV...
//                                  ARGV, ended once the pool lease in FILE has expired (lease_run.hpp)
//   ferry-node lease-set FILE EXPIRES_AT
//                                  that lease's expiry moved forward (lease_run.hpp)
//   ferry-node install SHA256 PATH this very file, checked to hash to SHA256, renamed to PATH
//   ferry-node as-tenant USER -- ARGV
//                                  ARGV exec'd as a pool tenant's own Unix user, made on first use
//                                  (tenant_account.hpp); its exit status and signals are the command's
//   ferry-node version
//
// Exit codes (lease-run's are its command's, lease_run.hpp): 0 done, 1 failed (the reason on stderr and in the trace), 2 bad usage or plan, 130 stopped
// by a signal (TERM, INT or HUP), in any phase from the wait for the plan on: the work is cancelled and
// every action still ends, as cancelled (or with its outcome, for work whose end a signal is: serve, or
// that finishes first: watchdog); work that has not ended within the plan's shutdown_grace_ms is cut off
// with the root action ended.
#include "agent/node/error.hpp"
#include "agent/node/idle_watchdog.hpp"
#include "agent/node/lease_run.hpp"
#include "agent/node/line_reader.hpp"
#include "agent/node/materialise_layers.hpp"
#include "agent/node/layer_cache.hpp"
#include "agent/node/peer_server.hpp"
#include "agent/node/stage_objects.hpp"
#include "agent/node/stage_plan.hpp"
#include "agent/node/tenant_account.hpp"
#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "net/tls_context.hpp"
#include "tracing/action_types.hpp"
#include "tracing/sink.hpp"
#include "tracing/task_id.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/array.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <variant>
#include <exception>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <iostream>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace node = ferry::agent::node;
using ferry::diagnostics;
using ferry::error_code;
using ferry::result;

int say(int code, const std::string& text) {
  std::fprintf(stderr, "ferry-node: %s\n", text.c_str());
  return code;
}

// Hashes this program's own file and renames it to `target` when it is the build ferry sent. A copy cut
// short by a dropped connection does not reach this point (it would not run); one damaged otherwise does,
// and removes itself.
int install(const std::string& expected, const std::string& target) {
  const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return say(1, fmt::format("cannot read /proc/self/exe: {}", std::strerror(errno)));
  ferry::net::sha256_stream hash;
  char buffer[1 << 16];
  for (;;) {
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    hash.update(reinterpret_cast<const unsigned char*>(buffer), static_cast<std::size_t>(n));
  }
  ::close(fd);
  char self[4096] = {};
  const auto length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return say(1, "cannot find this program's own path");
  const auto got = ferry::net::to_hex(hash.finish());
  if (got != expected) {
    ::unlink(self);
    return say(1, fmt::format("the program arrived with the SHA-256 {}, not {}: removed", got, expected));
  }
  if (::rename(self, target.c_str()) != 0)
    return say(1, fmt::format("cannot rename {} to {}: {}", self, target, std::strerror(errno)));
  return 0;
}

ferry::tracing::action root_action(ferry::tracing::sink& out, const std::string& task_id, std::string_view type) {
  diagnostics ignored;
  if (auto parent = ferry::tracing::parse_task_id(task_id, ignored))
    return ferry::tracing::action::continue_task(out, *parent, type);
  return ferry::tracing::action::start_task(out, type);
}

// The plan's first line, which names the task the root action continues: read on the io_context, so that
// a signal that comes while the plan is awaited ends the program as it ends any other phase.
asio::awaitable<result<std::string>> first_line(node::line_reader& lines, diagnostics& diag) {
  auto first = co_await lines.next(diag);
  if (!first) co_return first.error();
  if (!*first) {
    diag.set("the plan is empty");
    co_return make_error_code(node::errc::bad_plan);
  }
  co_return std::move(**first);
}

result<node::plan_header> parse_header(std::string_view first, diagnostics& diag) {
  auto parsed = node::parse_plan_line(first, diag);
  if (!parsed) return parsed.error();
  auto* header = std::get_if<node::plan_header>(&*parsed);
  if (!header) {
    diag.set("the plan does not begin with its header");
    return make_error_code(node::errc::bad_plan);
  }
  return std::move(*header);
}

ferry::net::http_client_settings http_settings_of(const node::node_limits& limits) {
  ferry::net::http_client_settings s;
  s.timeouts.connect = std::chrono::milliseconds(limits.connect_timeout_ms);
  s.timeouts.read = std::chrono::milliseconds(limits.read_timeout_ms);
  s.timeouts.write = std::chrono::milliseconds(limits.read_timeout_ms);
  s.max_connections_per_host = std::max(1, limits.parallelism);
  return s;
}

// What a subcommand's work needs: storage over HTTP(S) and the CPU pool.
struct work_context {
  work_context(asio::io_context& io, const node::node_limits& limits, std::shared_ptr<boost::asio::ssl::context> tls_context)
      : tls(std::move(tls_context)), http(io.get_executor(), http_settings_of(limits), tls), fetch{http, pool, limits, {}} {}

  ferry::net::cpu_pool pool;
  std::shared_ptr<boost::asio::ssl::context> tls;
  ferry::net::http_client http;
  node::fetch_context fetch;
};

// TERM, INT and HUP, armed before the program reads its plan, so that no phase is left to their default
// (death with the trace open, exit 143). The first signal cancels the work (terminal: the process is on
// its way out, nothing need stay usable); the work then has its grace to end its actions. A second
// signal, or the end of the grace, ends the root action (once it has begun) as cancelled and the process
// at once (exit 130), so that the trace is closed before ferry's KILL.
class signal_stop {
 public:
  explicit signal_stop(asio::io_context& io) : signals_(io, SIGTERM, SIGINT, SIGHUP), grace_timer_(io) { wait(); }

  asio::cancellation_slot slot() { return stop_.slot(); }
  bool stopped() const { return stopped_; }

  // From here on, the end of the grace (`grace`) ends `act` before the process.
  void guard(ferry::tracing::sink& out, ferry::tracing::action& act, std::chrono::milliseconds grace) {
    out_ = &out;
    act_ = &act;
    grace_ = grace;
    if (stopped_) start_grace();  // the signal came before the grace was known
  }

  // The work has ended: the io_context may end.
  void disarm() {
    error_code ignored;
    signals_.cancel(ignored);
    grace_timer_.cancel();
    act_ = nullptr;
  }

 private:
  void wait() {
    signals_.async_wait([this](const error_code& ec, int) {
      if (ec) return;
      if (stopped_) give_up();
      stopped_ = true;
      stop_.emit(asio::cancellation_type::terminal);
      start_grace();
      wait();
    });
  }

  void start_grace() {
    grace_timer_.expires_after(grace_);
    grace_timer_.async_wait([this](const error_code& ec) {
      if (!ec) give_up();
    });
  }

  [[noreturn]] void give_up() {
    if (act_) {
      act_->fail(asio::error::operation_aborted, "cancelled: the work did not end within its grace after the signal");
      out_->flush();
    }
    std::_Exit(130);
  }

  asio::cancellation_signal stop_;
  asio::signal_set signals_;
  asio::steady_timer grace_timer_;
  std::chrono::milliseconds grace_{node::node_limits{}.shutdown_grace_ms};
  bool stopped_ = false;
  ferry::tracing::sink* out_ = nullptr;
  ferry::tracing::action* act_ = nullptr;
};

// A subcommand's whole life, every phase under signal_stop: the plan's first line, parsed by
// `parse(line, diag)` (-> result<Plan>, a Plan with task_id and limits); then the root action `type`,
// which continues the plan's task; the TLS context; then `work(act, ctx, plan, lines, diag)` (->
// awaitable<result<T>>, which reads the rest of the plan if it has more), which ends the root action by
// `succeed(act, T)`, as failed, or as cancelled. The exit code.
template <class Plan, class T, class Parse, class Work, class Succeed>
int run_plan(std::string_view type, Parse parse, Work work, Succeed succeed) {
  asio::io_context io(1);
  signal_stop signals(io);
  node::line_reader lines(io.get_executor(), 0);
  diagnostics diag;
  std::unique_ptr<ferry::tracing::sink> out;
  std::optional<ferry::tracing::action> act;
  std::optional<Plan> plan;
  std::optional<work_context> ctx;
  error_code unread;  // the plan could not be read: no action began
  std::optional<result<T>> outcome;
  std::exception_ptr bug;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await ferry::net::accept_cancellation();
        auto first = co_await first_line(lines, diag);
        if (!first) {
          unread = first.error();
          co_return;
        }
        auto parsed = parse(*first, diag);
        if (!parsed) {
          unread = parsed.error();
          co_return;
        }
        plan.emplace(std::move(*parsed));
        out = ferry::tracing::sink::adopt(::dup(1), "stdout");
        act.emplace(root_action(*out, plan->task_id, type));
        signals.guard(*out, *act, std::chrono::milliseconds(plan->limits.shutdown_grace_ms));
        auto tls = ferry::net::make_tls_context("", diag);
        if (!tls) {
          outcome = result<T>(tls.error());
          co_return;
        }
        ctx.emplace(io, plan->limits, std::move(*tls));
        outcome = co_await work(*act, *ctx, *plan, lines, diag);
      },
      asio::bind_cancellation_slot(signals.slot(), [&](std::exception_ptr e) {
        bug = e;
        signals.disarm();
      }));
  io.run();

  if (!act && !bug) {
    if (signals.stopped()) return 130;  // stopped before the plan named its task: nothing to end
    return say(unread == node::errc::bad_plan ? 2 : 1, ferry::describe(unread, diag));
  }
  if (bug || !outcome) {
    // A bug or an exhausted machine (bad_alloc): said, and the process ends with the trace closed.
    std::string what = "the work ended without a result";
    try {
      if (bug) std::rethrow_exception(bug);
    } catch (const std::exception& e) {
      what = e.what();
    }
    if (act) {
      act->fail_exception("exception", what);
      out->flush();
    }
    return say(1, "internal error: " + what);
  }
  const auto& got = *outcome;
  if (!got) {
    act->fail(got.error(), diag);
    out->flush();
    if (signals.stopped()) return 130;
    return say(got.error() == node::errc::bad_plan ? 2 : 1, ferry::describe(got.error(), diag));
  }
  succeed(*act, *got);
  out->flush();
  return signals.stopped() ? 130 : 0;  // work that ends as it should when stopped (serve) still says so
}

int materialise() {
  return run_plan<node::plan_header, node::materialised>(
      ferry::action_types::node::materialise, parse_header,
      [](ferry::tracing::action& act, work_context& ctx, const node::plan_header& header, node::line_reader& lines,
         diagnostics& diag) {
        return node::materialise_layers(
            act, ctx.fetch, header, [&lines](diagnostics& d) { return lines.next(d); }, [&lines] { lines.cancel(); },
            diag);
      },
      [](ferry::tracing::action& a, const node::materialised& got) {
        boost::json::array path;
        for (const auto& p : got.python_path) path.emplace_back(p);
        const boost::json::value python_path(std::move(path));
        if (got.lazy) {
          // The command ran beside it: what it imported, and what it never needed.
          a.succeed({{"cache_dir", got.cache_dir},
                     {"workdir", got.workdir},
                     {"layers_cached", got.layers_cached},
                     {"layers_fetched", got.layers_fetched},
                     {"bytes_fetched", got.bytes_fetched},
                     {"layers_evicted", got.layers_evicted},
                     {"layers_left", got.layers_left},
                     {"imported", boost::json::value_from(got.imported)}});
          return;
        }
        a.succeed({{"cache_dir", got.cache_dir},
                   {"workdir", got.workdir},
                   {"python_path", python_path},
                   {"hook_dir", got.hook_dir},
                   {"site_file", got.site_file},
                   {"layers_cached", got.layers_cached},
                   {"layers_fetched", got.layers_fetched},
                   {"bytes_fetched", got.bytes_fetched},
                   {"layers_evicted", got.layers_evicted}});
      });
}

// Fan-out: this job's shards for the other nodes, until stdin ends (peer_server.hpp).
int serve() {
  return run_plan<node::serve_request, node::serve_outcome>(
      ferry::action_types::node::serve,
      [](std::string_view first, diagnostics& diag) -> result<node::serve_request> {
        auto request = node::parse_serve_request(first, diag);
        if (!request) return request.error();
        // The same directory materialise resolves: the configured one, or the XDG default.
        auto cache = node::layer_cache::open(request->cache_dir, diag);
        if (!cache) return cache.error();
        request->cache_dir = cache->dir();
        return request;
      },
      [](ferry::tracing::action& act, work_context&, const node::serve_request& request, node::line_reader& lines,
         diagnostics& diag) {
        // Until the input ends: ferry sends empty lines meanwhile, so that it reads this program's output.
        node::input_watch input_ended = [&lines]() -> asio::awaitable<void> {
          for (;;) {
            diagnostics ignored;
            auto line = co_await lines.next(ignored);
            if (!line || !*line) co_return;
          }
        };
        return node::serve_shards(act, request, std::move(input_ended), diag);
      },
      [](ferry::tracing::action& a, const node::serve_outcome& got) {
        a.succeed({{"requests", got.requests}, {"served", got.served}, {"refused", got.refused}, {"bytes", got.bytes}});
      });
}

// The staging plan: its header line, then as many object lines as the header says (`count`), read under
// the root action.
struct staging : node::stage_request {
  std::size_t count = 0;
};

asio::awaitable<result<node::stage_outcome>> read_and_stage(ferry::tracing::action& act, work_context& ctx,
                                                             staging& plan, node::line_reader& lines,
                                                             diagnostics& diag) {
  plan.objects.reserve(std::min<std::size_t>(plan.count, 1 << 20));
  for (std::size_t i = 0; i < plan.count; ++i) {
    auto line = co_await lines.next(diag);
    if (!line) co_return line.error();
    if (!*line) {
      diag.set(fmt::format("the staging plan ended after {} of its {} objects", i, plan.count));
      co_return make_error_code(node::errc::bad_plan);
    }
    auto object = node::parse_stage_object(**line, i, diag);
    if (!object) co_return object.error();
    plan.objects.push_back(std::move(*object));
  }
  co_return co_await node::stage_objects(act, ctx.fetch, plan, diag);
}

int stage() {
  return run_plan<staging, node::stage_outcome>(
      ferry::action_types::node::stage,
      [](std::string_view first, diagnostics& diag) -> result<staging> {
        auto header = node::parse_stage_header(first, diag);
        if (!header) return header.error();
        staging plan;
        static_cast<node::stage_request&>(plan) = std::move(header->first);
        plan.count = header->second;
        // A pool tenant's data: written as its user, where it may write, its alone.
        if (!plan.tenant.empty()) {
          auto became = node::become_tenant(plan.tenant, diag);
          if (!became) return became.error();
          ::umask(077);
        }
        return plan;
      },
      read_and_stage,
      [](ferry::tracing::action& a, const node::stage_outcome& got) {
        a.succeed({{"fetched", got.fetched}, {"kept", got.kept}, {"bytes_fetched", got.bytes}});
      });
}

// The signals a short, blocking piece of work holds back (blocked, so pending) until its action has ended.
class held_signals {
 public:
  held_signals() {
    sigemptyset(&set_);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set_, sig);
    ::sigprocmask(SIG_BLOCK, &set_, nullptr);
  }
  // Whether one came meanwhile.
  bool came() const {
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    for (int sig : {SIGTERM, SIGINT, SIGHUP})
      if (sigismember(&pending, sig)) return true;
    return false;
  }

 private:
  sigset_t set_;
};

// One line on stdin: the watchdog's settings; the outcome ends the root action. Setting the watchdog is
// short and blocking (at most a wait for an old watchdog to go): a signal that comes once the root action
// has begun waits until it has ended with that outcome, then ends the program (exit 130).
int watchdog() {
  std::string line;
  if (!std::getline(std::cin, line)) return say(2, "the watchdog plan is empty");
  diagnostics diag;
  auto request = node::parse_watchdog_line(line, diag);
  if (!request) return say(2, ferry::describe(request.error(), diag));
  const held_signals held;
  auto out = ferry::tracing::sink::adopt(::dup(1), "stdout");
  auto act = root_action(*out, request->task_id, ferry::action_types::node::watchdog);
  auto outcome = node::set_watchdog(*request, diag);
  if (!outcome) {
    act.fail(outcome.error(), diag);
    out->flush();
    return held.came() ? 130 : say(1, ferry::describe(outcome.error(), diag));
  }
  act.succeed({{"outcome", *outcome}});
  out->flush();
  return held.came() ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  // Before anything else: the command inherits this process as sh would have left it.
  if (command == "as-tenant" && argc >= 5 && std::string_view(argv[3]) == "--")
    return node::exec_as_tenant(argv[2], argv + 4);
  std::signal(SIGPIPE, SIG_IGN);
  if (command == "materialise" && argc == 2) return materialise();
  if (command == "stage" && argc == 2) return stage();
  if (command == "serve" && argc == 2) return serve();
  if (command == "watchdog" && argc == 2) return watchdog();
  if (command == "watchdog-loop" && argc == 3) return node::watchdog_loop(argv[2]);
  if (command == "lease-run") return node::lease_run(argc, argv);
  if (command == "lease-set") return node::lease_set(argc, argv);
  if (command == "install" && argc == 4) return install(argv[2], argv[3]);
  if (command == "version" && argc == 2) {
    std::printf("ferry-node %s\n", FERRY_VERSION);
    return 0;
  }
  return say(2, "usage: ferry-node materialise < PLAN | stage < PLAN | serve < REQUEST | watchdog < SETTINGS | lease-run FILE [--grace SECONDS] -- ARGV... | lease-set FILE EXPIRES_AT | install SHA256 PATH | as-tenant USER -- ARGV | version");
}
