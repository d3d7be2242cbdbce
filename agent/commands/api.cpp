// `ferry api [--nodes N] [--concurrency K] [--retries R] [--provider P] [--env K=V]...`: the agent half of
// the Python API (`import ferry`, docs/python-api.md). The ferry package starts it and speaks frames on its
// stdin and stdout; its stderr is the user's. Exit code 0 when the package ended its input and every
// result went out, 130 on Ctrl-C, 1 when the job failed or the package went away.
#include "agent/commands/command.hpp"

#include "agent/api/api_session.hpp"
#include "agent/cli/exit_code.hpp"
#include "agent/cli/report.hpp"
#include "agent/job/job.hpp"
#include "agent/run/node_output.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <csignal>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct api_args {
  int nodes = 0;        // 0: nodes.count
  int concurrency = 0;  // 0: agent.concurrency
  int retries = -1;     // -1: agent.retries
  std::vector<std::string> env;
};

// The frames' pipes, taken off fds 0 and 1 so that nothing else in this process (a stray print) or in a
// child it starts (which must not hold the client's pipe open after this process ends) reaches them.
struct client_pipes {
  int in = -1;
  int out = -1;
};

result<client_pipes> take_pipes(diagnostics& diag) {
  client_pipes p;
  p.in = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  p.out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (p.in < 0 || p.out < 0 || null < 0 || ::dup2(null, STDIN_FILENO) < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    diag.set(fmt::format("ferry api: cannot set up its pipes: {}", std::strerror(errno)));
    return error_code(errno, boost::system::system_category());
  }
  ::close(null);
  return p;
}

asio::awaitable<int> api_command(command_context& ctx, const api_args& args) {
  auto& act = ctx.trace;
  const auto& s = ctx.config.values;
  // A client that went away must end the writes to it with EPIPE, not end this process mid-cleanup.
  std::signal(SIGPIPE, SIG_IGN);
  diagnostics diag;
  auto pipes = take_pipes(diag);
  if (!pipes) co_return report(act, pipes.error(), diag, exit_code::failure);
  api::api_options options;
  options.nodes = static_cast<std::size_t>(args.nodes > 0 ? args.nodes : s.nodes.count);
  options.per_node = static_cast<std::size_t>(std::max(1, args.concurrency > 0 ? args.concurrency : s.agent.concurrency));
  options.retries = static_cast<unsigned>(args.retries >= 0 ? args.retries : s.agent.retries);
  if (std::string why; !parse_env_vars(args.env, options.vars, why)) {
    print_error(why);
    ::close(pipes->in);
    ::close(pipes->out);
    co_return exit_code::usage;
  }
  job j(ctx, act);
  j.lazy_start(s.agent.lazy_start);
  j.check_python(options.python);
  api::api_session session(ctx, act, j, std::move(options), pipes->in, pipes->out);
  if (auto opened = j.open("", diag); !opened) {
    // The client learns why from its frame, the terminal from the line on stderr.
    std::string frame;
    api::append_frame(frame, 'X', 0, describe(opened.error(), diag));
    (void)write_all(pipes->out, frame);
    co_return report(act, opened.error(), diag, exit_code::failure);
  }
  const int code = co_await session.run();
  for (const auto& f : j.failures()) fmt::print(stderr, "ferry: warning: {}\n", f);
  if (code == exit_code::interrupted) co_return report(act, asio::error::operation_aborted, diag, code);
  if (ctx.options.verbosity > 0) fmt::print(stderr, "ferry: {}\n", startup_line(j.times(), 0, j.since_start()));
  co_return code;
}

}  // namespace

void add_api_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<api_args>();
  auto provider = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("api", "the agent of the Python API (import ferry), which starts it: frames on stdin "
                                        "and stdout (docs/python-api.md)");
  cmd->add_option("--nodes", args->nodes, "nodes to start (nodes.count)")->check(CLI::Range(1, config::max_node_count));
  cmd->add_option("--concurrency", args->concurrency, "workers per node (agent.concurrency)")->check(CLI::Range(1, 1024));
  cmd->add_option("--retries", args->retries, "further attempts of a task whose worker was lost (agent.retries)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--provider", *provider, "local, ssh or ec2 (nodes.provider)");
  cmd->add_option("--env", args->env, "set NAME=VALUE in each worker's environment; NAME alone passes on the value it "
                                      "has here (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->callback([&selected, args, provider] {
    selected.action_type = action_types::api::job;
    if (!provider->empty()) selected.config_flags.push_back({"nodes.provider", *provider, "--provider"});
    selected.run = [args](command_context& ctx) { return api_command(ctx, *args); };
  });
}

}  // namespace ferry::agent
