#include "agent/pool/pool_record.hpp"

#include "agent/error.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>

namespace ferry::agent::pool {
namespace {

namespace json = boost::json;

constexpr std::array<std::string_view, 3> providers = {"local", "ssh", "ec2"};
constexpr std::array<std::string_view, 13> record_keys = {"version",  "node_id",    "provider",   "provider_id",
                                                          "address",  "ssh_port",   "user",       "host_key",
                                                          "capacity",
                                                          "created_at", "created_by", "idle_since", "leases"};
constexpr std::array<std::string_view, 5> lease_keys = {"id", "tenant", "slots", "holder", "expires_at"};

error_code bad(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::bad_pool_record);
}

// Reads one JSON object's fields, naming the object (`where`: "pool node 'x'" or "... leases[2]") and the
// field in the first error; later errors keep the first.
struct field_reader {
  const json::object& o;
  std::string where;
  diagnostics& diag;
  error_code ec;

  void fail(std::string_view key, std::string_view what) {
    if (!ec) ec = bad(diag, fmt::format("{}: '{}' {}", where, key, what));
  }
  // A field that is not one of `known`: refused, because a record is rewritten whole, and a field this
  // version does not know would be dropped by the rewrite (a newer format says so with its version).
  template <std::size_t N>
  void only(const std::array<std::string_view, N>& known) {
    for (const auto& kv : o)
      if (std::find(known.begin(), known.end(), std::string_view(kv.key())) == known.end())
        return fail(kv.key(), "is not a field of a pool record");
  }
  const json::value* get(std::string_view key) {
    const auto* v = o.if_contains(key);
    if (!v) fail(key, "is missing");
    return v;
  }
  std::string text(std::string_view key) {
    const auto* v = get(key);
    if (!v) return {};
    if (!v->is_string()) {
      fail(key, "is not a string");
      return {};
    }
    return std::string(v->get_string());
  }
  std::string non_empty(std::string_view key) {
    auto s = text(key);
    if (s.empty()) fail(key, "is empty");
    return s;
  }
  // A whole number in [low, high]; Boost.JSON gives integers written without a fraction or exponent as
  // int64 or uint64, anything else is a double and refused.
  std::int64_t integer(std::string_view key, std::int64_t low, std::int64_t high) {
    const auto* v = get(key);
    return v ? integer_of(key, *v, low, high) : 0;
  }
  std::int64_t integer_of(std::string_view key, const json::value& v, std::int64_t low, std::int64_t high) {
    std::optional<std::int64_t> n;
    if (v.is_int64()) n = v.get_int64();
    if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      n = static_cast<std::int64_t>(v.get_uint64());
    if (!v.is_number() || (v.is_double() && !n)) {
      fail(key, "is not a whole number");
      return low;
    }
    if (!n || *n < low || *n > high) {
      fail(key, fmt::format("is out of range ({} to {})", low, high));
      return low;
    }
    return *n;
  }
};

constexpr std::int64_t max_time = max_pool_time;
constexpr std::int64_t max_int = std::numeric_limits<int>::max();

lease read_lease(const json::value& v, std::string_view where, std::size_t index, diagnostics& diag,
                 error_code& ec) {
  lease l;
  const auto at = fmt::format("{}: leases[{}]", where, index);
  if (!v.is_object()) {
    ec = bad(diag, fmt::format("{} is not an object", at));
    return l;
  }
  field_reader r{v.get_object(), at, diag, {}};
  r.only(lease_keys);
  l.id = r.non_empty("id");
  l.tenant = r.non_empty("tenant");
  l.slots = static_cast<int>(r.integer("slots", 1, max_int));
  l.holder = r.non_empty("holder");
  l.expires_at = r.integer("expires_at", 0, max_time);
  ec = r.ec;
  return l;
}

json::object lease_json(const lease& l) {
  return {{"id", l.id}, {"tenant", l.tenant}, {"slots", l.slots}, {"holder", l.holder}, {"expires_at", l.expires_at}};
}

}  // namespace

int used_slots(const pool_record& r, pool_time now) {
  // Each lease is checked against capacity at parse time, and the sum of all of them too: no overflow.
  std::int64_t used = 0;
  for (const auto& l : r.leases)
    if (!l.expired(now)) used += l.slots;
  return static_cast<int>(std::min<std::int64_t>(used, max_int));
}

bool busy(const pool_record& r, pool_time now) {
  return std::any_of(r.leases.begin(), r.leases.end(), [&](const lease& l) { return !l.expired(now); });
}

std::optional<pool_time> idle_from(const pool_record& r, pool_time now) {
  if (busy(r, now)) return std::nullopt;
  pool_time from = r.idle_since.value_or(0);
  for (const auto& l : r.leases) from = std::max(from, l.expires_at);
  return from;
}

const lease* find_lease(const pool_record& r, std::string_view lease_id) {
  const auto it = std::find_if(r.leases.begin(), r.leases.end(), [&](const lease& l) { return l.id == lease_id; });
  return it == r.leases.end() ? nullptr : &*it;
}

void sort_leases(pool_record& r) {
  std::sort(r.leases.begin(), r.leases.end(), [](const lease& a, const lease& b) { return a.id < b.id; });
}

result<void> check_record(const pool_record& r, std::string_view where, diagnostics& diag) {
  const auto at = fmt::format("pool node '{}'", where);
  if (r.version != record_version)
    return bad(diag,
               fmt::format("{}: 'version' is {}, and this ferry reads version {}", at, r.version, record_version));
  if (r.node_id.empty()) return bad(diag, fmt::format("{}: 'node_id' is empty", at));
  if (std::find(providers.begin(), providers.end(), r.provider) == providers.end())
    return bad(diag, fmt::format("{}: 'provider' is '{}', not local, ssh or ec2", at, r.provider));
  if (r.address.empty()) return bad(diag, fmt::format("{}: 'address' is empty", at));
  if (r.ssh_port < 1 || r.ssh_port > 65535) return bad(diag, fmt::format("{}: 'ssh_port' is {}", at, r.ssh_port));
  if (r.user.empty()) return bad(diag, fmt::format("{}: 'user' is empty", at));
  if (r.capacity < 1) return bad(diag, fmt::format("{}: 'capacity' is {}, not at least 1 slot", at, r.capacity));
  if (r.created_by.empty()) return bad(diag, fmt::format("{}: 'created_by' is empty", at));
  std::set<std::string_view> ids;
  std::int64_t leased = 0;
  for (std::size_t i = 0; i < r.leases.size(); ++i) {
    const auto& l = r.leases[i];
    if (l.id.empty() || l.tenant.empty() || l.holder.empty())
      return bad(diag, fmt::format("{}: leases[{}] has an empty id, tenant or holder", at, i));
    if (l.slots < 1) return bad(diag, fmt::format("{}: leases[{}].slots is {}, not at least 1", at, i, l.slots));
    if (!ids.insert(l.id).second)
      return bad(diag, fmt::format("{}: leases[{}].id '{}' is held twice", at, i, l.id));
    leased += l.slots;
  }
  if (leased > r.capacity)
    return bad(diag, fmt::format("{}: 'leases' hold {} slots of a capacity of {}", at, leased, r.capacity));
  if (r.leases.empty() != r.idle_since.has_value())
    return bad(diag, fmt::format("{}: 'idle_since' is {} while the node holds {} leases", at,
                                 r.idle_since ? "set" : "null", r.leases.size()));
  return {};
}

result<pool_record> parse_record(std::string_view text, std::string_view where, diagnostics& diag) {
  const auto at = fmt::format("pool node '{}'", where);
  error_code ec;
  // A record is small; the limits keep a hostile one from costing much before it is refused.
  json::parse_options opt;
  opt.max_depth = 8;
  json::value parsed = json::parse(text, ec, {}, opt);
  if (ec) return bad(diag, fmt::format("{}: not JSON ({})", at, ec.message()));
  if (!parsed.is_object()) return bad(diag, fmt::format("{}: not a JSON object", at));
  field_reader f{parsed.get_object(), at, diag, {}};
  pool_record r;
  // The version first, on its own: a newer record is refused for its version, not for a field it added.
  r.version = static_cast<int>(f.integer("version", 0, max_int));
  if (f.ec) return f.ec;
  if (r.version != record_version)
    return bad(diag,
               fmt::format("{}: 'version' is {}, and this ferry reads version {}", at, r.version, record_version));
  f.only(record_keys);
  r.node_id = f.text("node_id");
  r.provider = f.text("provider");
  r.provider_id = f.text("provider_id");
  r.address = f.text("address");
  r.ssh_port = static_cast<int>(f.integer("ssh_port", 1, 65535));
  r.user = f.text("user");
  r.host_key = f.text("host_key");
  r.capacity = static_cast<int>(f.integer("capacity", 1, max_int));
  r.created_at = f.integer("created_at", 0, max_time);
  r.created_by = f.text("created_by");
  if (const auto* idle = f.get("idle_since"); idle && !idle->is_null())
    r.idle_since = f.integer_of("idle_since", *idle, 0, max_time);
  const auto* leases = f.get("leases");
  if (leases && !leases->is_array()) f.fail("leases", "is not a list");
  if (f.ec) return f.ec;
  const auto& list = leases->get_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    r.leases.push_back(read_lease(list[i], at, i, diag, ec));
    if (ec) return ec;
  }
  if (auto ok = check_record(r, where, diag); !ok) return ok.error();
  if (r.node_id != where && !where.empty())
    return bad(diag, fmt::format("{}: 'node_id' names node '{}'", at, r.node_id));
  sort_leases(r);
  return r;
}

std::string serialise_record(const pool_record& r) {
  auto sorted = r;
  sort_leases(sorted);
  json::array leases;
  for (const auto& l : sorted.leases) leases.emplace_back(lease_json(l));
  // json::object keeps insertion order: this order is the format's.
  const json::object o{{"version", r.version},
                       {"node_id", r.node_id},
                       {"provider", r.provider},
                       {"provider_id", r.provider_id},
                       {"address", r.address},
                       {"ssh_port", r.ssh_port},
                       {"user", r.user},
                       {"host_key", r.host_key},
                       {"capacity", r.capacity},
                       {"created_at", r.created_at},
                       {"created_by", r.created_by},
                       {"idle_since", r.idle_since ? json::value(*r.idle_since) : json::value(nullptr)},
                       {"leases", std::move(leases)}};
  return json::serialize(o) + "\n";
}

}  // namespace ferry::agent::pool
