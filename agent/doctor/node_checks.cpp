#include "agent/doctor/node_checks.hpp"

#include "agent/doctor/ssh_checks.hpp"
#include "agent/error.hpp"
#include "agent/provide/node_access.hpp"
#include "agent/provide/node_program.hpp"
#include "agent/pack/pack_job.hpp"
#include "agent/run/python_check.hpp"
#include "net/deadline.hpp"
#include "net/error.hpp"
#include "net/node_link.hpp"
#include "net/offload.hpp"
#include "net/run_all.hpp"
#include "net/shell_quote.hpp"
#include "provision/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <sstream>

namespace ferry::agent::doctor {
namespace {

namespace asio = boost::asio;

// What the node says about itself, one `key=value` a line; `missing` once per absent tool.
std::string probe_script(const node_program& program) {
  return fmt::format(
      "echo \"arch=$(uname -m 2>/dev/null)\"; "
      "for t in cat mkdir chmod; do command -v \"$t\" >/dev/null 2>&1 || echo \"missing=$t\"; done; "
      "c=\"${{XDG_CACHE_HOME:-$HOME/.cache}}/ferry\"; echo \"cache=$c\"; "
      "if mkdir -p \"$c/bin\" 2>/dev/null && [ -w \"$c/bin\" ]; then echo cache_ok=1; fi; "
      "s=\"${{XDG_STATE_HOME:-$HOME/.local/state}}/ferry\"; echo \"state=$s\"; "
      "if mkdir -p \"$s\" 2>/dev/null && [ -w \"$s\" ]; then echo state_ok=1; fi; "
      "if [ -x \"$c/bin/ferry-node-{}\" ]; then echo installed=1; fi; "
      // The interpreter commands find as python3, as a run checks it (python_check.hpp).
      "if command -v python3 >/dev/null 2>&1; then python3 -S -c {} 2>&1; else echo python=none; fi",
      program.sha256, net::shell_quote(node_python_script()));
}

struct node_facts {
  std::string arch, cache, state;
  std::vector<std::string> missing;
  bool cache_ok = false, state_ok = false, installed = false;
  std::optional<node_python> python;  // none: no python3, or no answer from it
  std::string python_why;             // why there is none
};

node_facts parse_facts(const std::string& out) {
  node_facts f;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const auto key = line.substr(0, eq);
    auto value = line.substr(eq + 1);
    if (key == "arch") f.arch = value;
    else if (key == "missing") f.missing.push_back(value);
    else if (key == "cache") f.cache = value;
    else if (key == "state") f.state = value;
    else if (key == "cache_ok") f.cache_ok = true;
    else if (key == "state_ok") f.state_ok = true;
    else if (key == "installed") f.installed = true;
    else if (key == "python") f.python_why = "no python3 on PATH";
  }
  node_python py;
  if (f.python_why.empty() && parse_node_python(out, py, f.python_why)) f.python = py;
  return f;
}

std::string who(const provision::node& n) { return fmt::format("{} ({}, {}:{})", n.name, n.id, n.host, n.port); }

// The node's python3 against the interpreter ferry packs with: a refusal, or words for the passing line.
std::optional<check_result> judge_python(const std::string& name, const provision::node& n, const node_facts& f,
                                         const std::optional<packaging::python_info>& local, std::string& words) {
  if (!f.python) {
    words = fmt::format("; {} (a command that runs Python needs one)", f.python_why);
    return std::nullopt;
  }
  if (!local) {
    words = fmt::format("; python3 {}", f.python->version);
    return std::nullopt;
  }
  const auto verdict = compare_python(*local, *f.python, who(n) + "'s python3", {});
  if (verdict.what == python_verdict::kind::refuse)
    return failed(name, verdict.text, "a run refuses this node for commands that run python3",
                  make_error_code(errc::python_mismatch));
  words = verdict.what == python_verdict::kind::warn
              ? fmt::format("; python3 {} (packed with {}: a run warns)", f.python->version, local->version)
              : fmt::format("; python3 {} as packed", f.python->version);
  return std::nullopt;
}

// What the facts say against the program's needs.
check_result judge(const std::string& name, const provision::node& n, const node_facts& f, const std::string& built_for,
                   const std::optional<packaging::python_info>& local) {
  if (!f.missing.empty())
    return failed(name, fmt::format("{} lacks {}: the node program is put in place and started with sh, cat, "
                                    "mkdir and chmod", who(n), fmt::join(f.missing, ", ")),
                  "install coreutils on the node (or use an image that has them)");
  if (!built_for.empty() && canonical_machine(f.arch) != built_for)
    return failed(name, fmt::format("{} is a {} machine, but the node program ferry sends is built for {}", who(n),
                                    f.arch.empty() ? "machine `uname -m` cannot name" : f.arch, built_for),
                  fmt::format("use {} nodes (ec2.architecture), or build ferry-node for {} and name it in "
                              "agent.node_program", built_for, f.arch));
  if (!f.cache_ok)
    return failed(name, fmt::format("{} cannot write its cache dir {} (the node program and the layers go there)",
                                    who(n), f.cache),
                  fmt::format("make {} writable by the login user on the node, or give that user an XDG_CACHE_HOME "
                              "that is", f.cache));
  if (!f.state_ok)
    return failed(name, fmt::format("{} cannot write its state dir {} (the idle watchdog's)", who(n), f.state),
                  fmt::format("make {} writable by the login user on the node", f.state));
  std::string python;
  if (auto refused = judge_python(name, n, f, local, python)) return std::move(*refused);
  return passed(name, fmt::format("{}: answers SSH, {} like ferry-node, sh, cat, mkdir and chmod there, cache {} "
                                  "writable, this build of ferry-node {}{}",
                                  who(n), f.arch, f.cache, f.installed ? "installed" : "not there yet (sent on first use)",
                                  python));
}

std::string connect_fix(const error_code& ec, const provision::node& n, const net::ssh_client_options& ssh) {
  if (ec == net::errc::host_key_changed)
    return fmt::format("if {} was rebuilt, delete its line in {} and run the doctor again; otherwise find out who "
                       "answers at {}",
                       n.id, ssh.known_hosts.string(), n.host);
  if (ec == net::errc::ssh_auth_failed)
    return fmt::format("put {}.pub in ~{}/.ssh/authorized_keys on the node, or set ssh.identity_file to a key it "
                       "accepts",
                       ssh_key_file(ssh).string(), n.user.empty() ? ssh.settings.user : n.user);
  return fmt::format("see whether it still runs (`ferry nodes ls`); `ferry nodes down {}` ends and forgets it, "
                     "and a slow network needs a larger ssh.connect_timeout",
                     n.id);
}

// A node's state now, as its provider tells it (the registry's when it cannot say within the deadline).
asio::awaitable<provision::node> current(tracing::action& act, provision::provider* p, provision::node n,
                                         std::chrono::milliseconds limit) {
  if (!p) co_return n;
  diagnostics ignored;
  auto now = co_await net::with_deadline(p->describe(act, n, ignored), limit);
  if (now && *now) co_return std::move(**now);
  co_return n;
}

struct node_job {
  provision::node n;
  provision::provider* p = nullptr;
  check_result result;
};

struct node_context {
  const command_context& ctx;
  const node_access& access;
  const node_program& program;
  std::string built_for;
  std::optional<packaging::python_info> python;  // what ferry packs with, when it could be asked
};

asio::awaitable<check_result> probe_node(tracing::action& act, const node_context& c, const std::string& name,
                                         const provision::node& n) {
  diagnostics diag;
  // Locals, not temporaries, as arguments: GCC 12 mishandles temporaries with destructors across co_await.
  const auto script = probe_script(c.program);
  auto link = co_await connect_node(act, n, c.access, diag);
  if (!link)
    co_return failed(name, fmt::format("{} does not let ferry in: {}", who(n), describe(link.error(), diag)),
                     connect_fix(link.error(), n, c.access.ssh), link.error());
  const auto limit = c.ctx.config.values.net.read_timeout;
  auto ran = co_await net::with_deadline(net::run_command(act, **link, script, diag), limit);
  (*link)->close();
  if (!ran)
    co_return failed(name, fmt::format("{} logged ferry in but its shell did not answer within {} (net.read_timeout)",
                                       who(n), config::format_duration(limit)),
                     "see what holds the node up (load, a login script that waits); a slow node needs a larger "
                     "net.read_timeout",
                     make_error_code(net::errc::timeout));
  if (!*ran || !(*ran)->exit.success()) {
    const auto why = *ran ? (*ran)->exit.describe() + ": " + (*ran)->err : describe(ran->error(), diag);
    co_return failed(name, fmt::format("{}: the check's shell command failed ({})", who(n), why),
                     "make the login user's shell a POSIX sh that runs commands (`ssh NODE true` shows what happens)",
                     *ran ? make_error_code(net::errc::ssh_channel_failed) : ran->error());
  }
  co_return judge(name, n, parse_facts((*ran)->out), c.built_for, c.python);
}

asio::awaitable<void> check_node(tracing::action& parent, const node_context& c, node_job& job) {
  co_await net::accept_cancellation();
  const auto name = "node:" + job.n.id;
  auto act = open_check(parent, name);
  job.n = co_await current(act, job.p, job.n, c.ctx.config.values.ssh.connect_timeout);
  using provision::node_state;
  if (job.n.state == node_state::stopped || job.n.state == node_state::terminated) {
    job.result = close_check(act, passed(name, fmt::format("{} is {}: ferry does not use it (`ferry nodes down {}` "
                                                           "forgets it)",
                                                           who(job.n), provision::to_string(job.n.state), job.n.id)));
    co_return;
  }
  if (job.n.state == node_state::orphaned) {
    job.result = close_check(act, failed(name, fmt::format("{} may still run: its provider never confirmed its end",
                                                           who(job.n)),
                                         fmt::format("`ferry nodes down {}` tries again", job.n.id)));
    co_return;
  }
  auto probed = co_await probe_node(act, c, name, job.n);
  job.result = close_check(act, std::move(probed));
}

// A static ferry-node is a few MiB: anything near this is not one.
constexpr std::uintmax_t max_program_bytes = 256u << 20;

check_result program_result(const result<std::shared_ptr<const node_program>>& program, const diagnostics& diag) {
  const std::string name = "node.program";
  if (!program)
    return failed(name, diag.message,
                  "build it (`cmake --build BUILD --target ferry-node`, or scripts/build.sh), or name one in "
                  "agent.node_program",
                  program.error());
  const auto& p = **program;
  const auto machine = elf_machine(p.bytes);
  if (machine.empty())
    return failed(name, fmt::format("{} is not a Linux program for a machine ferry knows", p.local.string()),
                  "build ferry-node again, or name the right file in agent.node_program");
  return passed(name, fmt::format("{}: built for {}, sha256 {}", p.local.string(), machine, p.sha256.substr(0, 16)));
}

// The nodes check when the registry has no node to check, or cannot be read.
check_result registry_result(const provision::node_registry& registry, result<std::vector<provision::node>>& nodes,
                             const diagnostics& diag) {
  const std::string name = "nodes";
  if (!nodes)
    return failed(name, diag.message, "`ferry nodes ls` sets a damaged registry aside and starts a new one",
                  nodes.error());
  return passed(name, fmt::format("no node recorded in {} (`ferry nodes up N` starts some)", registry.file().string()));
}

}  // namespace

std::string elf_machine(std::string_view elf) {
  if (elf.size() < 20 || elf.substr(0, 4) != "\x7f" "ELF" || elf[5] != 1) return "";  // little-endian only
  const auto machine = static_cast<unsigned>(static_cast<unsigned char>(elf[18])) |
                       static_cast<unsigned>(static_cast<unsigned char>(elf[19])) << 8;
  switch (machine) {
    case 3: return "i386";
    case 40: return "arm";
    case 62: return "x86_64";
    case 183: return "aarch64";
    case 243: return "riscv64";
    default: return "";
  }
}

std::string canonical_machine(std::string_view uname_m) {
  if (uname_m == "arm64") return "aarch64";
  if (uname_m == "i486" || uname_m == "i586" || uname_m == "i686") return "i386";
  if (uname_m.starts_with("armv")) return "arm";
  return std::string(uname_m);
}

asio::awaitable<std::vector<check_result>> check_nodes(tracing::action& parent, const command_context& ctx) {
  std::vector<check_result> out;
  std::shared_ptr<const node_program> program;
  {
    auto act = open_check(parent, "node.program");
    // Read and hashed on the CPU pool: some megabytes, while the storage checks wait on the I/O thread.
    const std::filesystem::path path = ctx.config.values.agent.node_program;
    diagnostics program_diag;
    // A named callable: GCC 12 destroys a temporary lambda with a non-trivial capture twice across co_await.
    const auto load = [&path, &program_diag] { return shared_node_program(path, program_diag); };
    // Looked at before it is read: a directory throws from the reader, a FIFO or device never ends.
    if (auto problem = path.empty() ? std::nullopt : unreadable_kind(path, max_program_bytes)) {
      out.push_back(close_check(act, failed("node.program", *problem,
                                            "build ferry-node (`cmake --build BUILD --target ferry-node`) and name "
                                            "the file in agent.node_program, or unset it to use the one beside ferry",
                                            make_error_code(errc::node_lacks_tools))));
    } else {
      auto loaded = co_await net::offload(ctx.cpu, load);
      if (loaded) program = *loaded;
      out.push_back(close_check(act, program_result(loaded, program_diag)));
    }
  }
  // Not open_node_access(): that makes ferry's own key when it is missing, and the doctor reports a missing key
  // rather than make one. The ssh.key check has seen the key ferry logs in with.
  const auto& s = ctx.config.values;
  const node_access access{ssh_public_line(s), net::ssh_client_options::from(s),
                           provision::node_registry(provision::registry_file(s.dirs.state),
                                                    s.nodes.registry_lock_timeout),
                           provision::readiness_options_from(s)};
  diagnostics diag;
  auto nodes = access.registry.load(diag);
  if (!nodes || nodes->empty()) {
    auto act = open_check(parent, "nodes");
    out.push_back(close_check(act, registry_result(access.registry, nodes, diag)));
    co_return out;
  }
  std::map<std::string, std::unique_ptr<provision::provider>> providers;
  std::vector<node_job> jobs;
  for (auto& n : *nodes) {
    if (!providers.contains(n.provider)) {
      diagnostics d;
      auto p = provider_named(ctx, access, n.provider, d);
      providers.emplace(n.provider, p ? std::move(*p) : nullptr);
    }
    jobs.push_back({n, providers[n.provider].get(), {}});
  }
  if (!program) {
    for (auto& job : jobs) out.push_back(skip_check(parent, "node:" + job.n.id, "skipped: no node program to check against"));
    co_return out;
  }
  // The interpreter runs pack with (packaging.python): its answer is cached, so this costs little.
  std::optional<packaging::python_info> python;
  diagnostics python_diag;
  if (auto found = co_await packaging::discover(parent, discover_options_for(ctx), python_diag))
    python = packaging::python_info_of(*found);
  const node_context c{ctx, access, *program, elf_machine(program->bytes), std::move(python)};
  std::vector<asio::awaitable<void>> tasks;
  for (auto& job : jobs) tasks.push_back(check_node(parent, c, job));
  co_await net::run_all(std::move(tasks));
  for (auto& job : jobs) out.push_back(std::move(job.result));
  co_return out;
}

}  // namespace ferry::agent::doctor
