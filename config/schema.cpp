#include "config/schema.hpp"

#include "config/pool_name.hpp"
#include "config/spelling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <type_traits>

namespace ferry::config {
namespace {

// Value readers, one per setting type. Each returns false with `why` set when the node does not fit.

bool read(const toml::node& n, std::string& out, std::string& why, bool& wrong_type) {
  if (auto v = n.value<std::string>()) {
    out = *v;
    return true;
  }
  wrong_type = true;
  why = "expected a string";
  return false;
}

bool read(const toml::node& n, bool& out, std::string& why, bool& wrong_type) {
  if (!n.is_boolean()) {
    wrong_type = true;
    why = "expected true or false";
    return false;
  }
  out = n.as_boolean()->get();
  return true;
}

bool read(const toml::node& n, int& out, std::string& why, bool& wrong_type) {
  if (!n.is_integer()) {
    wrong_type = true;
    why = "expected an integer";
    return false;
  }
  const auto v = n.as_integer()->get();
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    why = fmt::format("{} is out of range (0 to {})", v, std::numeric_limits<int>::max());
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

bool read(const toml::node& n, duration& out, std::string& why, bool& wrong_type) {
  if (n.is_integer() || n.is_floating_point()) {
    const double seconds = n.value<double>().value_or(-1);
    if (auto d = duration_of_seconds(seconds)) {
      out = *d;
      return true;
    }
    why = fmt::format("{} seconds is not a duration: 0 or more, and at most {}", seconds,
                      format_duration(max_duration));
    return false;
  }
  if (auto text = n.value<std::string>()) {
    if (auto d = parse_duration(*text)) {
      out = *d;
      return true;
    }
    why = fmt::format("{} is not a duration (examples: \"250ms\", \"10s\", \"5m\", \"4h\"; at most {})",
                      quoted_value(*text), format_duration(max_duration));
    return false;
  }
  wrong_type = true;
  why = "expected a duration such as \"10s\" or a number of seconds";
  return false;
}

bool read(const toml::node& n, byte_size& out, std::string& why, bool& wrong_type) {
  if (n.is_integer()) {
    const auto v = n.as_integer()->get();
    if (v < 0 || static_cast<std::uint64_t>(v) > max_byte_size.bytes) {
      why = fmt::format("{} is not a size: 0 or more, and at most {}", v, format_byte_size(max_byte_size));
      return false;
    }
    out = byte_size{static_cast<std::uint64_t>(v)};
    return true;
  }
  if (auto text = n.value<std::string>()) {
    if (auto s = parse_byte_size(*text)) {
      out = *s;
      return true;
    }
    why = fmt::format("{} is not a size (examples: \"8MiB\", \"1GB\", 4096; at most {})", quoted_value(*text),
                      format_byte_size(max_byte_size));
    return false;
  }
  wrong_type = true;
  why = "expected a size such as \"8MiB\" or a number of bytes";
  return false;
}

bool read(const toml::node& n, std::vector<std::string>& out, std::string& why, bool& wrong_type) {
  const auto* array = n.as_array();
  if (!array) {
    wrong_type = true;
    why = "expected an array of strings";
    return false;
  }
  std::vector<std::string> values;
  for (const auto& item : *array) {
    auto v = item.value<std::string>();
    if (!v) {
      wrong_type = true;
      why = "expected an array of strings";
      return false;
    }
    values.push_back(*v);
  }
  out = std::move(values);
  return true;
}

// ---- nodes.ssh_hosts: an array of "[user@]host[:port]" strings or tables {name, host, port, user,
// identity_file} ----

using ssh_host = nodes_settings::ssh_host;

bool refuse(std::string& why, std::string text) {
  why = std::move(text);
  return false;
}

bool read_host_text(std::string_view text, ssh_host& h, std::string& why) {
  if (const auto at = text.find('@'); at != std::string_view::npos) {
    h.user = std::string(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  std::string_view port;
  if (text.starts_with('[')) {  // [v6 address]:port
    const auto close = text.find(']');
    if (close == std::string_view::npos) return refuse(why, "unclosed '[' in an IPv6 host");
    h.host = std::string(text.substr(1, close - 1));
    if (text.size() > close + 1 && text[close + 1] == ':') port = text.substr(close + 2);
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    h.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  } else {
    h.host = std::string(text);
  }
  if (!port.empty()) {
    int p = 0;
    for (char c : port) p = (c >= '0' && c <= '9' && p < 100000) ? p * 10 + (c - '0') : 100000;
    h.port = p;
  }
  return true;
}

bool read_host_table(const toml::table& t, ssh_host& h, std::string& why) {
  for (const auto& [k, v] : t) {
    const auto name = k.str();
    const auto text = v.value<std::string>();
    if (name == "port") {
      if (!v.is_integer()) return refuse(why, "port: expected an integer");
      h.port = static_cast<int>(std::clamp<std::int64_t>(v.as_integer()->get(), -1, 100000));
    } else if (!text) {
      return refuse(why, fmt::format("{}: expected a string", name));
    } else if (name == "name") {
      h.name = *text;
    } else if (name == "host") {
      h.host = *text;
    } else if (name == "user") {
      h.user = *text;
    } else if (name == "identity_file") {
      h.identity_file = *text;
    } else {
      return refuse(why, fmt::format("unknown field '{}' (fields: name, host, port, user, identity_file)", name));
    }
  }
  return true;
}

bool read_host(const toml::node& item, ssh_host& h, std::string& why) {
  bool ok = false;
  if (auto text = item.value<std::string>())
    ok = read_host_text(*text, h, why);
  else if (const auto* t = item.as_table())
    ok = read_host_table(*t, h, why);
  else
    return refuse(why, "expected a \"user@host:port\" string or a table");
  if (ok && h.host.empty()) return refuse(why, "no host");
  if (ok && (h.port < 1 || h.port > 65535)) return refuse(why, "port must be between 1 and 65535");
  return ok;
}

bool read(const toml::node& n, std::vector<ssh_host>& out, std::string& why, bool& wrong_type) {
  const auto* array = n.as_array();
  if (!array) {
    wrong_type = true;
    why = "expected an array of hosts: \"user@host:port\" strings or tables with host, port, user, identity_file";
    return false;
  }
  std::vector<ssh_host> hosts;
  for (std::size_t i = 0; i < array->size(); ++i) {
    ssh_host h;
    std::string item_why;
    if (!read_host(*array->get(i), h, item_why)) return refuse(why, fmt::format("host {}: {}", i + 1, item_why));
    hosts.push_back(std::move(h));
  }
  out = std::move(hosts);
  return true;
}

std::string toml_quoted(std::string_view s);

std::string show(const std::vector<ssh_host>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto& h = v[i];
    out += fmt::format("{}{{ host = {}, port = {}", i ? ", " : "", toml_quoted(h.host), h.port);
    if (!h.name.empty()) out += ", name = " + toml_quoted(h.name);
    if (!h.user.empty()) out += ", user = " + toml_quoted(h.user);
    if (!h.identity_file.empty()) out += ", identity_file = " + toml_quoted(h.identity_file);
    out += " }";
  }
  return out + "]";
}

constexpr std::array<std::string_view, 3> local_network_choices = {"auto", "netns", "loopback"};

// ---- end of nodes.ssh_hosts ----

std::string toml_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string show(const std::string& v) { return toml_quoted(v); }
std::string show(bool v) { return v ? "true" : "false"; }
std::string show(int v) { return std::to_string(v); }
std::string show(duration v) { return toml_quoted(format_duration(v)); }
std::string show(byte_size v) { return toml_quoted(format_byte_size(v)); }
std::string show(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + toml_quoted(v[i]);
  return out + "]";
}

// ec2: a number of GiB (integer or float), and the words some [ec2] keys take.
bool read(const toml::node& n, double& out, std::string& why, bool& wrong_type) {
  if (!n.is_integer() && !n.is_floating_point()) {
    wrong_type = true;
    why = "expected a number";
    return false;
  }
  const double v = n.value<double>().value_or(-1);
  if (!(v >= 0)) {
    why = fmt::format("{} is out of range (0 or more)", v);
    return false;
  }
  out = v;
  return true;
}

std::string show(double v) { return fmt::format("{}", v); }

constexpr std::array<std::string_view, 2> ec2_address_choices = {"private", "public"};
constexpr std::array<std::string_view, 2> ec2_architecture_choices = {"x86_64", "arm64"};

// One of a fixed set of words.
template <std::size_t N>
bool one_of(const std::string& value, const std::array<std::string_view, N>& choices, std::string& why) {
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return true;
  why = fmt::format("{} is not one of: {}", quoted_value(value), fmt::join(choices, ", "));
  return false;
}

// Binds a key to the member reached through the member pointers `Path` (settings -> section -> field).
template <auto... Path>
key_spec key(std::string_view name, std::string_view def, std::string_view help, std::string_view env = {}) {
  using member = std::remove_cvref_t<decltype((std::declval<settings&>().*....*Path))>;
  return {name, def, help, env, std::is_same_v<member, std::string>,
          [](settings& s, const toml::node& n, std::string& why, bool& wrong_type) {
            return read(n, (s.*....*Path), why, wrong_type);
          },
          [](const settings& s) { return show((s.*....*Path)); }};
}

// Like key(), for a string that must be one of `choices`.
template <auto Choices, auto... Path>
key_spec choice(std::string_view name, std::string_view def, std::string_view help, std::string_view env = {}) {
  auto spec = key<Path...>(name, def, help, env);
  spec.apply = [](settings& s, const toml::node& n, std::string& why, bool& wrong_type) {
    std::string value;
    if (!read(n, value, why, wrong_type) || !one_of(value, *Choices, why)) return false;
    (s.*....*Path) = value;
    return true;
  };
  return spec;
}

// Like key(), for an integer that must lie in [Lo, Hi].
template <int Lo, int Hi, auto... Path>
key_spec ranged(std::string_view name, std::string_view def, std::string_view help, std::string_view env = {}) {
  auto spec = key<Path...>(name, def, help, env);
  spec.apply = [](settings& s, const toml::node& n, std::string& why, bool& wrong_type) {
    if (!n.is_integer()) {
      wrong_type = true;
      why = "expected an integer";
      return false;
    }
    const auto v = n.as_integer()->get();
    if (v < Lo || v > Hi) {
      why = fmt::format("{} is out of range ({} to {})", v, Lo, Hi);
      return false;
    }
    (s.*....*Path) = static_cast<int>(v);
    return true;
  };
  return spec;
}

// Like key(), for a duration that must be at least `MinMs` milliseconds: a deadline or an interval for which
// 0 means nothing sensible (a connect deadline of 0 fails every request; a poll interval of 0 spins).
// Durations where 0 has a meaning of its own ("0s: never", "0s: no limit") are plain key()s.
template <long long MinMs, auto... Path>
key_spec at_least(std::string_view name, std::string_view def, std::string_view help, std::string_view env = {}) {
  auto spec = key<Path...>(name, def, help, env);
  spec.apply = [](settings& s, const toml::node& n, std::string& why, bool& wrong_type) {
    duration value{};
    if (!read(n, value, why, wrong_type)) return false;
    if (value.count() < MinMs) {
      why = fmt::format("{} is too short: it must be at least {}", format_duration(value),
                        format_duration(duration(MinMs)));
      return false;
    }
    (s.*....*Path) = value;
    return true;
  };
  return spec;
}

// pool.name: empty, or a name the pool's prefix in storage can carry (config/pool_name.hpp).
key_spec pool_name_key(std::string_view name, std::string_view def, std::string_view help) {
  auto spec = key<&settings::pool, &pool_settings::name>(name, def, help);
  spec.apply = [](settings& s, const toml::node& n, std::string& why, bool& wrong_type) {
    std::string value;
    if (!read(n, value, why, wrong_type)) return false;
    if (!value.empty()) {
      why = pool_name_problem(value);
      if (!why.empty()) return false;
    }
    s.pool.name = value;
    return true;
  };
  return spec;
}

template <auto... Path>
key_spec positive(std::string_view name, std::string_view def, std::string_view help, std::string_view env = {}) {
  return at_least<1, Path...>(name, def, help, env);
}

constexpr std::array<std::string_view, 3> addressing_choices = {"auto", "path", "virtual"};
constexpr std::array<std::string_view, 3> provider_choices = {"local", "ssh", "ec2"};
constexpr std::array<std::string_view, 2> symlink_choices = {"follow", "refuse"};
constexpr std::array<std::string_view, 2> codec_choices = {"zstd", "deflate"};

using S = settings;

const std::vector<key_spec>& table() {
  static const std::vector<key_spec> keys = {
      // storage
      key<&S::storage, &storage_settings::url>("storage.url", R"("")",
          "where layers are stored: s3://BUCKET/PREFIX", "FERRY_STORAGE_URL"),
      key<&S::storage, &storage_settings::endpoint>("storage.endpoint", R"("")",
          "S3 endpoint URL; empty: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile, then AWS"),
      key<&S::storage, &storage_settings::node_endpoint>("storage.node_endpoint", R"("")",
          "the S3 endpoint as nodes reach it, for presigned URLs; empty: the same as storage.endpoint"),
      key<&S::storage, &storage_settings::region>("storage.region", R"("")",
          "region; empty: AWS_REGION, AWS_DEFAULT_REGION, the profile, then us-east-1"),
      choice<&addressing_choices, &S::storage, &storage_settings::addressing>("storage.addressing", R"("auto")",
          "bucket addressing: auto, path or virtual"),
      key<&S::storage, &storage_settings::ca_bundle>("storage.ca_bundle", R"("")",
          "PEM file of CA certificates trusted besides the system store"),
      // net
      positive<&S::net, &net_settings::connect_timeout>("net.connect_timeout", R"("10s")",
          "deadline for a TCP (and TLS) connection"),
      key<&S::net, &net_settings::read_timeout>("net.read_timeout", R"("60s")",
          "deadline for each read while a response arrives"),
      key<&S::net, &net_settings::write_timeout>("net.write_timeout", R"("60s")",
          "deadline for each write while a request is sent"),
      key<&S::net, &net_settings::pool_idle_timeout>("net.pool_idle_timeout", R"("30s")",
          "how long an idle keep-alive connection is kept"),
      key<&S::net, &net_settings::max_connections_per_host>("net.max_connections_per_host", "16",
          "connections open at once to one endpoint"),
      key<&S::net, &net_settings::retry, &retry_settings::max_attempts>("net.retry.max_attempts", "5",
          "attempts per request, the first included"),
      key<&S::net, &net_settings::retry, &retry_settings::base_delay>("net.retry.base_delay", R"("100ms")",
          "first backoff ceiling; doubles per attempt, with full jitter"),
      key<&S::net, &net_settings::retry, &retry_settings::max_delay>("net.retry.max_delay", R"("20s")",
          "largest backoff between attempts"),
      key<&S::net, &net_settings::stall_warning>("net.stall_warning", R"("10s")",
          "storage that makes no progress this long is named on the terminal; 0s: never"),
      key<&S::net, &net_settings::stall_limit>("net.stall_limit", R"("2m")",
          "storage that makes no progress this long, retries included, ends the command; 0s: never"),
      key<&S::net, &net_settings::abort_timeout>("net.abort_timeout", R"("15s")",
          "the budget of the one attempt at aborting a failed multipart upload; 0s: the request timeouts'"),
      // s3
      key<&S::s3, &s3_settings::multipart_threshold>("s3.multipart_threshold", R"("1GiB")",
          "files up to this size go up in one streamed PUT, larger ones as multipart uploads"),
      key<&S::s3, &s3_settings::part_size>("s3.part_size", R"("8MiB")", "multipart upload part size"),
      key<&S::s3, &s3_settings::parts_in_flight>("s3.parts_in_flight", "4",
          "parts of one upload in memory and in flight at once"),
      key<&S::s3, &s3_settings::max_concurrency>("s3.max_concurrency", "16",
          "S3 requests in flight at once (existence checks, uploads)"),
      at_least<1000, &S::s3, &s3_settings::presign_expiry>("s3.presign_expiry", R"("1h")",
          "lifetime of presigned URLs"),
      // packaging
      key<&S::packaging, &packaging_settings::python>("packaging.python", R"("python3")",
          "the interpreter whose sys.path is shipped"),
      key<&S::packaging, &packaging_settings::ship_site_packages>("packaging.ship_site_packages", "true",
          "ship site-packages (false when node images already hold them)"),
      key<&S::packaging, &packaging_settings::excludes>("packaging.excludes", "[]",
          "extra exclude patterns, gitignore syntax"),
      key<&S::packaging, &packaging_settings::compression_level>("packaging.compression_level", "1",
          "deflate level 0-9 for layer zips"),
      choice<&codec_choices, &S::packaging, &packaging_settings::codec>("packaging.codec", R"("zstd")",
          "how layer zips are compressed: zstd (fast; read by ferry's node program, libarchive, Python 3.14) or "
          "deflate (zips that unzip and Python's zipfile read)"),
      ranged<1, 19, &S::packaging, &packaging_settings::zstd_level>("packaging.zstd_level", "3",
          "zstd level 1-19 for layer zips (packaging.codec zstd)"),
      key<&S::packaging, &packaging_settings::shard_size>("packaging.shard_size", R"("128MiB")",
          "layers larger than this are split into shards compressed in parallel"),
      key<&S::packaging, &packaging_settings::max_layer_size>("packaging.max_layer_size", R"("4GiB")",
          "a layer larger than this is refused unless forced"),
      key<&S::packaging, &packaging_settings::large_file_warning>("packaging.large_file_warning", R"("100MiB")",
          "warn about any file larger than this"),
      choice<&symlink_choices, &S::packaging, &packaging_settings::external_symlinks>(
          "packaging.external_symlinks", R"("follow")", "symlinks leaving a layer: follow or refuse"),
      key<&S::packaging, &packaging_settings::hash_threads>("packaging.hash_threads", "0",
          "threads for hashing and compression; 0: one per core"),
      positive<&S::packaging, &packaging_settings::discover_timeout>("packaging.discover_timeout", R"("30s")",
          "deadline for asking the interpreter for its sys.path"),
      key<&S::packaging, &packaging_settings::stale_upload_age>("packaging.stale_upload_age", R"("1d")",
          "a pack aborts multipart uploads of layers under its prefix begun longer ago than this (0s: never)"),
      key<&S::packaging, &packaging_settings::manifest_refresh>("packaging.manifest_refresh", R"("1d")",
          "a pack that finds its manifest older than this stores it again, so that storage gc sees it in use "
          "(0s: at every pack)"),
      // nodes
      choice<&provider_choices, &S::nodes, &nodes_settings::provider>("nodes.provider", R"("local")",
          "where nodes come from: local, ssh or ec2", "FERRY_PROVIDER"),
      ranged<1, max_node_count, &S::nodes, &nodes_settings::count>("nodes.count", "1", "nodes a run uses"),
      ranged<0, max_node_count, &S::nodes, &nodes_settings::min_nodes>("nodes.min_nodes", "0",
          "nodes kept warm between runs"),
      ranged<1, max_node_count, &S::nodes, &nodes_settings::max_nodes>("nodes.max_nodes", "8",
          "most nodes ferry starts"),
      key<&S::nodes, &nodes_settings::idle_timeout>("nodes.idle_timeout", R"("30m")",
          "a node idle this long stops itself (a watchdog on the node); 0: never"),
      positive<&S::nodes, &nodes_settings::watchdog_interval>("nodes.watchdog_interval", R"("5s")",
          "how often a node's watchdog checks whether the node is idle (at most nodes.idle_timeout)"),
      positive<&S::nodes, &nodes_settings::ready_timeout>("nodes.ready_timeout", R"("5m")",
          "deadline for a new node to run and answer SSH"),
      positive<&S::nodes, &nodes_settings::poll_initial>("nodes.poll_initial", R"("50ms")",
          "first interval of readiness polling"),
      positive<&S::nodes, &nodes_settings::poll_max>("nodes.poll_max", R"("2s")",
          "largest interval of readiness polling"),
      key<&S::nodes, &nodes_settings::boot_delay>("nodes.boot_delay", R"("0s")",
          "local provider: delay before a node's sshd starts, to mimic a VM"),
      key<&S::nodes, &nodes_settings::cache_size>("nodes.cache_size", R"("10GiB")",
          "layer cache size on a node; least recently used layers are evicted above it"),
      key<&S::nodes, &nodes_settings::ssh_hosts>("nodes.ssh_hosts", "[]",
          "ssh provider: existing machines, \"user@host:port\" or { host, port, user, identity_file, name }"),
      choice<&local_network_choices, &S::nodes, &nodes_settings::local_network>("nodes.local_network", R"("auto")",
          "local provider: netns (a network namespace per node on bridge ferry0, root only), loopback, or auto"),
      key<&S::nodes, &nodes_settings::local_sshd>("nodes.local_sshd", R"("/usr/sbin/sshd")",
          "local provider: the sshd each node runs"),
      positive<&S::nodes, &nodes_settings::local_command_timeout>("nodes.local_command_timeout", R"("30s")",
          "local provider: deadline of each set-up command and of a node's teardown"),
      key<&S::nodes, &nodes_settings::fanout>("nodes.fanout", "true",
                                              "a job's nodes hand its layers on between them (fan-out)"),
      key<&S::nodes, &nodes_settings::fanout_min>("nodes.fanout_min", "4",
                                                  "fan-out is for jobs of more nodes than this"),
      key<&S::nodes, &nodes_settings::fanout_seeds>("nodes.fanout_seeds", "4",
                                                    "nodes of a fan-out that fetch from storage"),
      key<&S::nodes, &nodes_settings::fanout_degree>("nodes.fanout_degree", "3",
                                                     "nodes each node of a fan-out hands layers on to"),
      key<&S::nodes, &nodes_settings::fanout_wait>("nodes.fanout_wait", R"("30s")",
                                                   "how long a node waits for a shard its parent has not got yet"),
      key<&S::nodes, &nodes_settings::fanout_hold>("nodes.fanout_hold", R"("1500ms")",
                                                   "how long a node waits for its parent's server before storage"),
      positive<&S::nodes, &nodes_settings::start_estimate>("nodes.start_estimate", R"("10s")",
          "what a new node takes to be ready, until a job has timed one: a map grows only past this wait"),
      key<&S::nodes, &nodes_settings::registry_lock_timeout>("nodes.registry_lock_timeout", R"("10s")",
          "how long to wait while another ferry command updates the node registry"),
      // ssh
      key<&S::ssh, &ssh_settings::user>("ssh.user", R"("root")", "login user on nodes"),
      key<&S::ssh, &ssh_settings::identity_file>("ssh.identity_file", R"("")",
          "private key; empty: ferry's own ed25519 key, then ssh-agent"),
      key<&S::ssh, &ssh_settings::kex>("ssh.kex", R"("curve25519-sha256,sntrup761x25519-sha512@openssh.com")",
          "key exchange algorithms, preferred first"),
      positive<&S::ssh, &ssh_settings::connect_timeout>("ssh.connect_timeout", R"("10s")",
          "deadline for TCP connect, handshake and login"),
      key<&S::ssh, &ssh_settings::keepalive_interval>("ssh.keepalive_interval", R"("15s")",
          "a keepalive request goes out after this long without a packet from the peer"),
      key<&S::ssh, &ssh_settings::alive_timeout>("ssh.alive_timeout", R"("45s")",
          "a peer silent this long, keepalives unanswered, is gone: its commands fail"),
      key<&S::ssh, &ssh_settings::idle_timeout>("ssh.idle_timeout", R"("2m")",
          "a session with no command running this long is closed"),
      key<&S::ssh, &ssh_settings::kill_grace>("ssh.kill_grace", R"("5s")",
          "a cancelled remote command gets TERM, then KILL after this long"),
      key<&S::ssh, &ssh_settings::max_sessions>("ssh.max_sessions", "64", "SSH sessions open at once"),
      // agent
      key<&S::agent, &agent_settings::concurrency>("agent.concurrency", "4", "tasks per node in ferry map"),
      key<&S::agent, &agent_settings::retries>("agent.retries", "2", "retries of a failed task on another node"),
      key<&S::agent, &agent_settings::task_output_limit>("agent.task_output_limit", R"("64MiB")",
          "stdout and stderr kept of each map task; a task that writes more fails"),
      key<&S::agent, &agent_settings::shutdown_grace>("agent.shutdown_grace", R"("5s")",
          "after Ctrl-C, how long steps may clean up before they are cut off"),
      positive<&S::agent, &agent_settings::download_timeout>("agent.download_timeout", R"("60s")",
          "a layer download on a node that receives nothing for this long fails (and is tried again)"),
      key<&S::agent, &agent_settings::download_parallelism>("agent.download_parallelism", "8",
          "layer shards one node downloads at once"),
      key<&S::agent, &agent_settings::download_range>("agent.download_range", R"("8MiB")",
          "a layer shard larger than this reaches a node in ranged GETs of this size"),
      key<&S::agent, &agent_settings::max_shard_content>("agent.max_shard_content", R"("64GiB")",
          "a node refuses a layer shard that would expand to more than this, whatever its manifest says"),
      key<&S::agent, &agent_settings::node_program>("agent.node_program", R"("")",
          "the ferry-node program put on nodes; empty: the one built beside the ferry executable"),
      key<&S::agent, &agent_settings::cache_lock_timeout>("agent.cache_lock_timeout", R"("30m")",
          "how long a node waits while another ferry run materialises layers into the same cache"),
      key<&S::agent, &agent_settings::stage_parallelism>("agent.stage_parallelism", "16",
          "objects one node downloads at once when staging data (--stage)"),
      key<&S::agent, &agent_settings::lazy_start>("agent.lazy_start", "true",
          "run and map start a Python command once the workspace is on the node; each import waits for its "
          "own layer"),
      positive<&S::agent, &agent_settings::cluster_start_timeout>("agent.cluster_start_timeout", R"("2m")",
          "ferry cluster: how long the scheduler and the workers have to start and register on ready nodes"),
      // ec2
      key<&S::ec2, &ec2_settings::region>("ec2.region", R"("")",
          "EC2 region; empty: AWS_REGION, AWS_DEFAULT_REGION, the profile, then us-east-1"),
      key<&S::ec2, &ec2_settings::endpoint>("ec2.endpoint", R"("")",
          "EC2 endpoint URL; empty: AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL, the profile, then AWS"),
      key<&S::ec2, &ec2_settings::ami>("ec2.ami", R"("")", "the AMI nodes boot (ami-...); required to create nodes"),
      key<&S::ec2, &ec2_settings::subnet_id>("ec2.subnet_id", R"("")",
          "subnet nodes start in; empty: the default VPC's default subnet"),
      key<&S::ec2, &ec2_settings::security_group_ids>("ec2.security_group_ids", "[]",
          "security groups of nodes (sg-...); empty: the VPC's default group"),
      key<&S::ec2, &ec2_settings::instance_type>("ec2.instance_type", R"("")",
          "use exactly this instance type; empty: the cheapest that meets min_cpus and min_memory_gib"),
      key<&S::ec2, &ec2_settings::spot>("ec2.spot", "false", "start spot instances rather than on-demand ones"),
      key<&S::ec2, &ec2_settings::min_cpus>("ec2.min_cpus", "2", "fewest vCPUs an instance type may have"),
      key<&S::ec2, &ec2_settings::min_memory_gib>("ec2.min_memory_gib", "4",
          "least memory (GiB) an instance type may have"),
      choice<&ec2_architecture_choices, &S::ec2, &ec2_settings::architecture>("ec2.architecture", R"("x86_64")",
          "CPU architecture of the AMI, which picked types must match: x86_64 or arm64"),
      choice<&ec2_address_choices, &S::ec2, &ec2_settings::address>("ec2.address", R"("private")",
          "the address ferry connects to: private or public"),
      key<&S::ec2, &ec2_settings::catalogue_ttl>("ec2.catalogue_ttl", R"("4h")",
          "how long the cached instance type and spot price catalogue is used before it is fetched again"),
      key<&S::ec2, &ec2_settings::user>("ec2.user", R"("")", "login user on EC2 nodes; empty: ssh.user"),
      // pool
      pool_name_key("pool.name", R"("")",
                    "a team's shared pool of nodes in storage (PREFIX/pools/NAME/) that run, map and cluster lease "
                    "slots from; empty: private nodes"),
      key<&S::pool, &pool_settings::tenant>("pool.tenant", R"("")",
          "who a pool's slots are counted against; on a shared node its commands run as the Unix user ferry-NAME, made on first use; empty: $USER@host"),
      ranged<0, max_node_count, &S::pool, &pool_settings::min_nodes>("pool.min_nodes", "0",
          "nodes the pool keeps however idle (takes the place of nodes.min_nodes)"),
      ranged<1, max_node_count, &S::pool, &pool_settings::max_nodes>("pool.max_nodes", "4",
          "nodes in the pool at most (takes the place of nodes.max_nodes)"),
      ranged<0, max_node_count, &S::pool, &pool_settings::max_nodes_per_tenant>("pool.max_nodes_per_tenant", "0",
          "nodes one tenant holds leases on at once; 0: no cap"),
      ranged<1, 256, &S::pool, &pool_settings::node_slots>("pool.node_slots", "1",
          "slots of a node the pool makes: the leases it holds at once"),
      key<&S::pool, &pool_settings::idle_timeout>("pool.idle_timeout", R"("10m")",
          "a pool node beyond pool.min_nodes idle this long stops itself (takes the place of nodes.idle_timeout)"),
      at_least<10000, &S::pool, &pool_settings::lease_ttl>("pool.lease_ttl", R"("2m")",
          "a lease not renewed this long is free for others; the holder renews it every third of this"),
      positive<&S::pool, &pool_settings::max_wait>("pool.max_wait", R"("10m")",
          "how long a job waits for a slot while the pool is full"),
      at_least<1000, &S::pool, &pool_settings::poll>("pool.poll", R"("5s")",
          "a job waiting for a slot reads the pool again at least this often"),
      ranged<1, 1000, &S::pool, &pool_settings::max_conflicts>("pool.max_conflicts", "50",
          "another agent's writes in a row that a lease request retries before it gives up"),
  };
  return keys;
}

}  // namespace

std::string key_spec::env_name() const {
  if (!env.empty()) return std::string(env);
  std::string out = "FERRY_";
  for (char c : name) out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::span<const key_spec> schema() { return table(); }

const key_spec* find_key(std::string_view name) {
  for (const auto& k : table())
    if (k.name == name) return &k;
  return nullptr;
}

namespace {

std::string_view leaf_of(std::string_view name) { return name.substr(name.rfind('.') + 1); }

}  // namespace

std::vector<std::string_view> closest_keys(std::string_view name) {
  std::vector<std::string_view> names, leaves;
  for (const auto& k : table()) {
    names.push_back(k.name);
    leaves.push_back(leaf_of(k.name));
  }
  if (const auto best = closest_word(name, names); !best.empty()) return {best};
  // A key written in the wrong section: the section's name alone is more edits than a typo.
  std::vector<std::string_view> out;
  if (name.find('.') == std::string_view::npos) return out;
  for (const auto i : closest_words(leaf_of(name), leaves)) out.push_back(names[i]);
  return out;
}

}  // namespace ferry::config
