#include "provision/local/machine.hpp"

#include "net/cancellation.hpp"
#include "provision/command.hpp"
#include "provision/error.hpp"
#include "provision/local/network.hpp"
#include "provision/local/process_table.hpp"
#include "provision/local/sshd_files.hpp"
#include "provision/state_file.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <charconv>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::provision::local {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

// How many addresses a new node tries before it concludes the bridge is full (each try is one `ip` call).
constexpr std::size_t address_tries = 64;
// Between scans for a stopping machine's processes: SIGKILL takes effect within a scheduler tick or two.
constexpr auto rescan_interval = 10ms;

error_code setup_failed(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::local_setup_failed);
}

std::string_view to_string(network_mode m) { return m == network_mode::netns ? "netns" : "loopback"; }

std::string string_at(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::uint64_t number_at(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v && v->is_uint64()) return v->get_uint64();
  return v && v->is_int64() && v->get_int64() > 0 ? static_cast<std::uint64_t>(v->get_int64()) : 0;
}

// The process name /proc shows for the sshd binary: its file name, cut to 15 characters.
std::string comm_of(const fs::path& exe) { return exe.filename().string().substr(0, 15); }

// "mnt:[4026532301]" as the boot script leaves it in the node's dir; 0 when it is not there (yet).
std::uint64_t recorded_mount_namespace(const fs::path& file) {
  error_code ec;
  const auto text = read_state_file(file, ec).value_or("");
  const auto open = text.find('[');
  std::uint64_t id = 0;
  if (open != std::string::npos) std::from_chars(text.data() + open + 1, text.data() + text.size(), id);
  return id;
}

// ---- the steps of start_machine ----

result<void> make_dirs(const sshd_layout& l, diagnostics& diag) {
  std::error_code ec;
  for (const auto& d : {l.dir, l.home(), l.cache()}) {
    fs::create_directories(d, ec);
    if (ec) return setup_failed(diag, fmt::format("cannot create {}: {}", d.string(), ec.message()));
  }
  fs::permissions(l.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  return {};
}

asio::awaitable<result<std::string>> make_host_key(tracing::action& parent, const sshd_layout& l, milliseconds timeout,
                                                   diagnostics& diag) {
  auto act = parent.child(action_types::local::host_key);
  const std::vector<std::string> argv{"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry-node-" + l.id,
                                      "-f", l.host_key().string()};
  auto ran = co_await run_command(argv, timeout, diag);
  if (ran && ran->exit_code != 0)
    ran = setup_failed(diag, fmt::format("{} failed: {}", command_line(argv), trimmed(ran->err)));
  error_code ec;
  std::optional<std::string> key;
  if (ran) key = read_state_file(fs::path(l.host_key()).concat(".pub"), ec);
  if (ran && !key) ran = setup_failed(diag, fmt::format("ssh-keygen wrote no {}.pub", l.host_key().string()));
  act.finish(ran, diag);
  if (!ran) co_return ran.error();
  co_return trimmed(*key);
}

// The namespace, an address claimed through its veth, the link configured.
asio::awaitable<result<void>> set_up_netns(tracing::action& parent, const machine_spec& spec, machine& m,
                                           diagnostics& diag) {
  auto act = parent.child(action_types::local::network, {{"netns", netns_name(spec.id)}});
  std::vector<std::uint16_t> candidates;
  if (spec.address.empty())
    candidates = candidate_indexes(spec.id, address_tries);
  else if (const auto fixed = node_index(spec.address))
    candidates = {*fixed};
  result<void> done;
  if (candidates.empty())
    done = setup_failed(diag, fmt::format("{} is not a node address in {}/{}", spec.address, bridge_address,
                                          prefix_length));
  if (done) done = co_await ensure_bridge(act, spec.command_timeout, diag);
  if (done) m.netns = netns_name(spec.id);
  for (std::size_t i = 0; done && m.veth.empty() && i < candidates.size(); ++i) {
    auto claimed = co_await claim_address(act, m.netns, candidates[i], spec.command_timeout, diag);
    if (!claimed) {
      done = claimed.error();
    } else if (*claimed) {
      m.veth = veth_name(candidates[i]);
      m.address = node_address(candidates[i]);
    }
  }
  if (done && m.veth.empty())
    done = setup_failed(diag, spec.address.empty()
                                  ? fmt::format("no free address on {}: {} tried", bridge_name, candidates.size())
                                  : fmt::format("address {} is taken by another node", spec.address));
  if (done) done = co_await configure_node_link(act, m.netns, *node_index(m.address), spec.command_timeout, diag);
  act.finish(done, diag, {{"address", m.address}, {"veth", m.veth}});
  co_return done;
}

result<void> set_up_loopback(const machine_spec& spec, machine& m, diagnostics& diag) {
  m.address = spec.address.empty() ? loopback_address(spec.id) : spec.address;
  const auto port = free_port(m.address);
  if (!port) return setup_failed(diag, fmt::format("no free port on {}", m.address));
  m.port = *port;
  return {};
}

result<void> write_files(const sshd_layout& l, const std::string& authorized_key, diagnostics& diag) {
  if (auto r = write_state_file(l.authorized_keys(), authorized_key + "\n", diag); !r) return r;
  if (auto r = write_state_file(l.config(), sshd_config_text(l), diag); !r) return r;
  return write_state_file(l.boot_script(), boot_script_text(l), diag);
}

// Runs the boot script detached: setsid gives it a session of its own, and the shell around it exits at
// once, so that init adopts it and it outlives this process. Until its setsid runs, the child is still in
// the shell's process group, so the group must not be killed when the shell exits (leftovers::keep).
// Returns its pid, which stays the sshd's pid through every exec of the boot script.
asio::awaitable<result<int>> launch(tracing::action& parent, const sshd_layout& l, milliseconds timeout,
                                    diagnostics& diag) {
  auto act = parent.child(action_types::local::launch, {{"boot_delay_ms", l.boot_delay.count()}});
  const std::vector<std::string> argv{"/bin/sh", "-c", R"(setsid /bin/sh "$0" </dev/null >>"$1" 2>&1 & echo $!)",
                                      l.boot_script().string(), l.log().string()};
  auto ran = co_await run_command(argv, timeout, diag, leftovers::keep);
  int pid = 0;
  if (ran) {
    const auto text = trimmed(ran->out);
    std::from_chars(text.data(), text.data() + text.size(), pid);
    if (pid <= 0) ran = setup_failed(diag, fmt::format("launching {} printed no pid: {}", l.boot_script().string(),
                                                       trimmed(ran->err)));
  }
  act.finish(ran, diag, {{"pid", pid}});
  if (!ran) co_return result<int>(sys::in_place_error, ran.error());
  co_return pid;
}

std::string login_user(fs::path& home) {
  const auto* pw = ::getpwuid(::geteuid());
  home = pw && pw->pw_dir ? pw->pw_dir : "/root";
  return pw && pw->pw_name ? pw->pw_name : "root";
}

asio::awaitable<result<void>> start_steps(tracing::action& act, const machine_spec& spec, machine& m,
                                          diagnostics& diag) {
  const bool root = ::geteuid() == 0;
  if (spec.mode == network_mode::netns && !root)
    co_return setup_failed(diag, fmt::format("local node {}: a network namespace needs root; "
                                             "set nodes.local_network = \"loopback\"", spec.id));
  sshd_layout l{spec.id, spec.dir, {}, 22, {}, root, {}, spec.sshd, spec.boot_delay};
  m.user = login_user(l.login_home);
  if (auto r = make_dirs(l, diag); !r) co_return r;
  auto key = co_await make_host_key(act, l, spec.command_timeout, diag);
  if (!key) co_return key.error();
  m.host_key = *key;
  result<void> net;
  if (spec.mode == network_mode::netns)
    net = co_await set_up_netns(act, spec, m, diag);
  else
    net = set_up_loopback(spec, m, diag);
  if (!net) co_return net;
  l.address = m.address;
  l.port = m.port;
  l.netns = m.netns;
  if (auto r = write_files(l, spec.authorized_key, diag); !r) co_return r;
  std::error_code ec;
  if (root) fs::create_directories("/run/sshd", ec);  // sshd's privilege separation dir, gone after a reboot
  auto pid = co_await launch(act, l, spec.command_timeout, diag);
  if (!pid) co_return pid.error();
  m.pid = *pid;
  if (const auto info = read_process(m.pid)) m.start_time = info->start_time;
  co_return result<void>{};
}

// ---- stop_machine ----

// One sweep: SIGKILL to the sshd's group, its descendants, and every process in its namespaces. True when
// there was anything left to kill.
bool sweep(const machine& m, std::uint64_t mnt_ns, std::uint64_t net_ns) {
  bool found = false;
  if (const auto info = read_process(m.pid); info && info->start_time == m.start_time && info->state != 'Z') {
    for (const auto& d : descendants_of(m.pid)) found |= kill_if_child_of(d);
    found |= kill_if_started_at(m.pid, m.start_time, true);
  }
  for (const auto& [kind, id] : {std::pair{"mnt", mnt_ns}, std::pair{"net", net_ns}})
    for (int pid : processes_in_namespace(kind, id)) found |= kill_if_member(pid, kind, id);
  return found;
}

// An open namespace file: while it is held the namespace lives, so its number names no other.
struct namespace_pin {
  int fd = -1;
  std::uint64_t id = 0;
  namespace_pin() = default;
  namespace_pin(const namespace_pin&) = delete;
  namespace_pin& operator=(const namespace_pin&) = delete;
  ~namespace_pin() {
    if (fd >= 0) ::close(fd);
  }
};

// The machine's mount namespace, held open through its sshd while that still runs in it. A namespace's
// number goes to the next namespace made as soon as the old one is gone, so the number recorded in
// mnt_ns (or read from a process that has since died) may by now be another node's: sweeping by it
// would kill that node. Without a live sshd to hold it by, there is no mount namespace to sweep (in a
// network namespace every process of the node is also swept by the netns, which `ip netns` holds).
void pin_mount_namespace(const machine& m, namespace_pin& pin) {
  const auto recorded = recorded_mount_namespace(m.dir / "mnt_ns");
  const auto file = fs::path("/proc") / std::to_string(m.pid) / "ns" / "mnt";
  pin.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (pin.fd < 0 || ::fstat(pin.fd, &st) != 0) return;
  // Still the sshd (same start time, not a zombie) after the open: the fd is of its namespace.
  const auto info = read_process(m.pid);
  const bool ours = info && info->start_time == m.start_time && info->state != 'Z';
  if (ours && (recorded == 0 || st.st_ino == recorded)) pin.id = st.st_ino;
}

asio::awaitable<result<void>> end_processes(tracing::action& act, const machine& m, milliseconds timeout,
                                            diagnostics& diag) {
  namespace_pin mount;
  pin_mount_namespace(m, mount);
  const auto mnt_ns = mount.id;
  // /run/netns/NAME holds the network namespace until remove_node_network, which runs after this.
  const auto net_ns = m.netns.empty() ? 0 : namespace_id(fs::path("/run/netns") / m.netns);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int sweeps = 1; sweep(m, mnt_ns, net_ns); ++sweeps) {
    if (std::chrono::steady_clock::now() > deadline)
      co_return setup_failed(diag, fmt::format("local node {}: processes still alive after {} sweeps in {} ms",
                                               m.id, sweeps, timeout.count()));
    timer.expires_after(rescan_interval);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return ec;
  }
  act.log(action_types::local::processes_ended, {{"mnt_ns", mnt_ns}, {"net_ns", net_ns}});
  co_return result<void>{};
}

}  // namespace

json::object machine::to_json() const {
  return {{"id", id},       {"dir", dir.string()}, {"mode", to_string(mode)}, {"address", address},
          {"port", port},   {"user", user},        {"netns", netns},          {"veth", veth},
          {"sshd", sshd.string()}, {"pid", pid},   {"start_time", start_time}, {"host_key", host_key}};
}

machine machine::from_json(const json::object& o) {
  machine m;
  m.id = string_at(o, "id");
  m.dir = string_at(o, "dir");
  m.mode = string_at(o, "mode") == "loopback" ? network_mode::loopback : network_mode::netns;
  m.address = string_at(o, "address");
  m.port = static_cast<std::uint16_t>(number_at(o, "port"));
  m.user = string_at(o, "user");
  m.netns = string_at(o, "netns");
  m.veth = string_at(o, "veth");
  m.sshd = string_at(o, "sshd");
  m.pid = static_cast<int>(number_at(o, "pid"));
  m.start_time = number_at(o, "start_time");
  m.host_key = string_at(o, "host_key");
  return m;
}

machine_status status_of(const machine& m) {
  const auto info = read_process(m.pid);
  if (!info || info->start_time != m.start_time || info->state == 'Z' || info->state == 'X')
    return machine_status::gone;
  return info->comm == comm_of(m.sshd) ? machine_status::running : machine_status::booting;
}

std::string last_log_line(const machine& m) {
  error_code ec;
  const auto text = trimmed(read_state_file(m.dir / "sshd.log", ec).value_or(""));
  const auto nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

asio::awaitable<result<machine>> start_machine(tracing::action& parent, const machine_spec& spec,
                                               diagnostics& diag) {
  auto act = parent.child(action_types::local::start, {{"id", spec.id}, {"mode", to_string(spec.mode)}});
  machine m;
  m.id = spec.id;
  m.dir = spec.dir;
  m.mode = spec.mode;
  m.sshd = spec.sshd;
  auto started = co_await start_steps(act, spec, m, diag);
  if (!started) {
    diagnostics ignored;  // the set-up failure is the story; cleaning up after it is best effort
    co_await stop_machine(act, m, spec.command_timeout, ignored);
    act.fail(started.error(), diag);
    co_return started.error();
  }
  act.succeed({{"address", m.address}, {"port", m.port}, {"pid", m.pid}});
  co_return m;
}

asio::awaitable<result<void>> stop_machine(tracing::action& parent, const machine& m, milliseconds timeout,
                                           diagnostics& diag) {
  auto act = parent.child(action_types::local::stop, {{"id", m.id}, {"pid", m.pid}, {"netns", m.netns}});
  auto done = co_await end_processes(act, m, timeout, diag);
  if (done) done = co_await remove_node_network(act, m.netns, m.veth, timeout, diag);
  act.finish(done, diag);
  co_return done;
}

}  // namespace ferry::provision::local
