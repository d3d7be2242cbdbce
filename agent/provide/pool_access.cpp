#include "agent/provide/pool_access.hpp"

#include "agent/error.hpp"
#include "agent/pool/tenant_name.hpp"
#include "config/error.hpp"
#include "net/atomic_file.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/ssh_keys.hpp"
#include "net/ssh_known_hosts.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ferry::agent {

namespace asio = boost::asio;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string user_name() {
  if (const char* u = std::getenv("USER"); u && *u) return u;
  if (const char* u = std::getenv("LOGNAME"); u && *u) return u;
  return fmt::format("uid{}", ::getuid());
}

std::optional<std::string> read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A key pair made in a directory of this process's own under `parent`, and its private half's text.
result<std::string> new_key_text(const std::filesystem::path& parent, diagnostics& diag) {
  const auto dir = parent / fmt::format("new-{}-{}", ::getpid(), net::random_hex(4));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto made = net::ensure_own_key(dir, diag);
  auto text = made ? read_file(net::own_key_path(dir)) : std::nullopt;
  std::filesystem::remove_all(dir, ec);
  if (!made) return made.error();
  if (!text) {
    diag.set(fmt::format("cannot read the pool key made in {}", dir.string()));
    return make_error_code(config::errc::bad_value);
  }
  return std::move(*text);
}

// The pool's key text: the one in storage, or one made here and stored when there is none (the first
// agent to store one wins; the others read the winner's).
asio::awaitable<result<std::string>> pool_key_text(tracing::action& act, pool::pool_store& store,
                                                   const std::filesystem::path& dir, diagnostics& diag) {
  for (int round = 0; round < 2; ++round) {
    auto got = co_await store.read_key(act, diag);
    if (!got) co_return got.error();
    if (*got) co_return std::move(**got);
    auto made = new_key_text(dir, diag);
    if (!made) co_return made.error();
    auto stored = co_await store.create_key(act, *made, diag);
    if (stored) co_return std::move(*made);
    if (stored.error() != net::errc::precondition_failed) co_return stored.error();
  }
  diag.set(fmt::format("the pool's key {} was stored by another agent and then could not be read",
                       store.where().ssh_key()));
  co_return make_error_code(net::errc::no_such_key);
}

}  // namespace

asio::awaitable<result<pool_access>> open_pool_access(tracing::action& parent, const command_context& ctx,
                                                      net::s3_client& s3, const net::ssh_client_options& ssh,
                                                      diagnostics& diag) {
  const auto& s = ctx.config.values;
  if (auto ok = pool::check_pool_name(s.pool.name, diag); !ok) co_return ok.error();
  const auto& url = ctx.config.storage.url.value();
  pool_access out{pool::pool_store(s3, pool::pool_at(url.bucket, url.key, s.pool.name))};
  out.name = s.pool.name;
  out.tenant = pool::tenant_of(s.pool.tenant, user_name(), host_name());
  if (out.tenant.empty()) {
    diag.set(fmt::format("pool.tenant '{}' has no letter or digit left as a Unix name", s.pool.tenant));
    co_return make_error_code(config::errc::bad_value);
  }
  out.holder = fmt::format("{}:{}:{}", host_name(), ::getpid(), net::random_hex(4));
  out.ttl = std::chrono::duration_cast<std::chrono::seconds>(s.pool.lease_ttl).count();
  out.renew_every = std::max<pool::pool_time>(1, out.ttl / 3);
  out.acquire.limits = {s.pool.max_nodes, s.pool.max_nodes_per_tenant, s.pool.node_slots};
  out.acquire.max_conflicts = s.pool.max_conflicts;
  out.acquire.max_wait = std::chrono::duration_cast<std::chrono::seconds>(s.pool.max_wait);
  out.acquire.poll = std::chrono::duration_cast<std::chrono::seconds>(s.pool.poll);

  // The pool's own files: its key and known_hosts, apart for each pool this agent uses.
  const auto where = out.store.where();
  const auto dir = s.dirs.config / "pools" / net::hex_sha256(where.bucket + "/" + where.prefix).substr(0, 16);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::permissions(s.dirs.config / "pools", std::filesystem::perms::owner_all, ec);
  auto text = co_await pool_key_text(parent, out.store, dir, diag);
  if (!text) co_return text.error();
  // The copy here follows storage's: a pool ended and made again has a new key.
  if (read_file(net::own_key_path(dir)) != *text) {
    std::filesystem::remove(net::own_key_path(dir).string() + ".pub", ec);
    if (auto written = net::write_file_atomically(net::own_key_path(dir), *text, diag, {.mode = 0600}); !written)
      co_return written.error();
  }
  auto pub = net::ensure_own_key(dir, diag);
  if (!pub) co_return pub.error();
  out.public_key = std::move(*pub);
  out.ssh = ssh;
  out.ssh.settings.identity_file = net::own_key_path(dir).string();
  out.ssh.known_hosts = dir / "known_hosts";
  co_return out;
}

result<void> pin_host_key(const pool_access& access, const std::string& label, const std::string& host_key,
                          diagnostics& diag) {
  const auto space = host_key.find(' ');
  net::public_key_info key;
  key.type = host_key.substr(0, space);
  key.base64 = space == std::string::npos ? std::string() : host_key.substr(space + 1);
  key.fingerprint = net::fingerprint_of(key.type, key.base64);
  // One word each, as known_hosts holds them: no space or line break from storage reaches the file.
  const auto one_word = [](const std::string& w) {
    return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c > ' ' && c < 127; });
  };
  if (key.fingerprint.empty() || !one_word(key.type) || !one_word(key.base64)) {
    diag.set(fmt::format("pool node {}: its record's host key is not a key", label));
    return make_error_code(errc::bad_pool_record);
  }
  auto checked = net::check_host_key(access.ssh.known_hosts, label, key, diag);
  if (!checked) return checked.error();
  return {};
}

}  // namespace ferry::agent
