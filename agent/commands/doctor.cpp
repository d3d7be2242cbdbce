// `ferry doctor [--nodes] [--json]`: what a run needs, checked before a run finds out. Storage (the
// credentials, the endpoint, the clock against storage's, listing and writing the storage.url prefix) and
// SSH (ferry's key and known_hosts, then with --nodes each node) are checked side by side; the report keeps
// one order whatever finished first. Exit code 0 only when every check passed.
#include "agent/commands/command.hpp"

#include "agent/cli/report.hpp"
#include "agent/doctor/node_checks.hpp"
#include "agent/doctor/report.hpp"
#include "agent/doctor/ssh_checks.hpp"
#include "agent/doctor/storage_checks.hpp"
#include "agent/cli/exit_code.hpp"
#include "config/units.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

namespace ferry::agent {
namespace {

namespace asio = boost::asio;

struct doctor_args {
  bool nodes = false;
  bool json = false;
  std::string clock_offset;
};

struct ssh_report {
  doctor::check_result key, known_hosts;
  std::vector<doctor::check_result> nodes;  // with --nodes
};

// "20m", "+20m", "-20m": config's durations with a sign.
std::optional<std::chrono::milliseconds> parse_offset(std::string_view text) {
  const bool negative = text.starts_with('-');
  if (negative || text.starts_with('+')) text.remove_prefix(1);
  const auto d = config::parse_duration(text);
  if (!d) return std::nullopt;
  return negative ? -*d : *d;
}

asio::awaitable<void> check_ssh(tracing::action& parent, const command_context& ctx, bool nodes, ssh_report& out) {
  co_await net::accept_cancellation();
  out.key = doctor::check_ssh_key(parent, ctx.config.values);
  out.known_hosts = doctor::check_known_hosts(parent, ctx.config.values);
  if (!nodes) co_return;
  if (!out.key.passed()) {
    out.nodes.push_back(doctor::skip_check(parent, "nodes", "skipped: ferry cannot log in to nodes without its SSH key"));
    co_return;
  }
  out.nodes = co_await doctor::check_nodes(parent, ctx);
}

std::vector<doctor::check_result> in_order(doctor::storage_report& s, ssh_report& h) {
  std::vector<doctor::check_result> all{std::move(s.credentials), std::move(s.endpoint), std::move(s.clock),
                                        std::move(s.list),        std::move(s.write),    std::move(h.key),
                                        std::move(h.known_hosts)};
  for (auto& n : h.nodes) all.push_back(std::move(n));
  return all;
}

bool write_report(const std::string& text) {
  const bool written = std::fwrite(text.data(), 1, text.size(), stdout) == text.size();
  if (written && std::fflush(stdout) == 0) return true;
  const int err = errno;
  print_error(fmt::format("cannot write the report to stdout: {}", std::strerror(err)));
  return false;
}

asio::awaitable<int> doctor_command(command_context& ctx, const doctor_args& args) {
  doctor::storage_options options;
  if (!args.clock_offset.empty()) {
    const auto offset = parse_offset(args.clock_offset);
    if (!offset) {
      print_error(fmt::format("--clock-offset '{}' is not a duration (such as 20m or -20m)", args.clock_offset));
      ctx.trace.fail_exception("usage", "bad --clock-offset");
      co_return exit_code::usage;
    }
    options.clock_offset = *offset;
    options.clock_offset_text = args.clock_offset;
  }
  doctor::storage_report storage;
  ssh_report ssh;
  std::vector<asio::awaitable<void>> halves;
  halves.push_back(doctor::check_storage(ctx.trace, ctx, options, storage));
  halves.push_back(check_ssh(ctx.trace, ctx, args.nodes, ssh));
  co_await net::run_all(std::move(halves));
  const auto checks = in_order(storage, ssh);
  // A report nobody could read is no report: a full disk or a closed pipe fails the command.
  if (!write_report(args.json ? doctor::render_json(checks) : doctor::render_text(checks))) {
    ctx.trace.fail_exception("io", "cannot write the report to stdout");
    co_return exit_code::failure;
  }
  if (co_await net::cancelled()) co_return exit_code::interrupted;
  co_return doctor::all_passed(checks) ? exit_code::success : exit_code::failure;
}

}  // namespace

void add_doctor_command(CLI::App& app, selected_command& selected) {
  auto args = std::make_shared<doctor_args>();
  auto* cmd = app.add_subcommand(
      "doctor", "check credentials, the storage endpoint, the clock, the storage.url bucket, ferry's SSH key and "
                "known_hosts (and with --nodes every node), each with its fix; exit code 0 when all pass");
  cmd->fallthrough();
  cmd->add_flag("--nodes", args->nodes, "also check every node of `ferry nodes ls`: SSH, and what ferry-node needs");
  cmd->add_flag("--json", args->json, "print one JSON document {ok, checks: [{name, status, ok, detail, fix}]}");
  cmd->add_option("--clock-offset", args->clock_offset,
                  "a test aid: shift ferry's clock by DURATION (20m, or --clock-offset=-20m) for the clock check and "
                  "the signing of doctor's requests")
      ->type_name("DURATION")
      ->group("Test aids");
  cmd->callback([&selected, args] {
    selected.action_type = action_types::doctor::command;
    selected.run = [args](command_context& ctx) { return doctor_command(ctx, *args); };
  });
}

}  // namespace ferry::agent
