#include "agent/pool/pool_store.hpp"

#include "agent/error.hpp"
#include "config/pool_name.hpp"
#include "net/fan_out.hpp"
#include "packaging/storage_lookup.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace ferry::agent::pool {
namespace {

constexpr std::string_view nodes_dir = "nodes/";
constexpr std::string_view record_suffix = ".json";

// The node id of a key under nodes/, or nothing for a key that names no record (a stray object).
std::optional<std::string> node_of(const pool_location& where, std::string_view key) {
  key.remove_prefix(std::min(key.size(), where.prefix.size() + nodes_dir.size()));
  if (!key.ends_with(record_suffix) || key.size() == record_suffix.size()) return std::nullopt;
  key.remove_suffix(record_suffix.size());
  if (key.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(key);
}

}  // namespace

std::string pool_location::key_of(std::string_view node_id) const {
  return fmt::format("{}{}{}{}", prefix, nodes_dir, node_id, record_suffix);
}

std::string pool_location::ssh_key() const { return prefix + "ssh-key"; }

pool_location pool_at(std::string bucket, std::string_view storage_prefix, std::string_view pool_name) {
  std::string prefix(storage_prefix);
  if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
  return {std::move(bucket), fmt::format("{}pools/{}/", prefix, pool_name)};
}

result<void> check_pool_name(std::string_view name, diagnostics& diag) {
  auto problem = config::pool_name_problem(name);
  if (problem.empty()) return {};
  diag.set(std::move(problem));
  return make_error_code(errc::bad_pool_name);
}

pool_store::pool_store(net::s3_client& s3, pool_location where) : s3_(s3), where_(std::move(where)) {}

boost::asio::awaitable<result<pool_snapshot>> pool_store::read(tracing::action& parent, diagnostics& diag) {
  auto act = parent.child(action_types::pool::read, {{"prefix", where_.prefix}});
  auto listed = co_await s3_.list_objects(act, where_.bucket, where_.prefix + std::string(nodes_dir), diag);
  if (!listed) {
    act.fail(listed.error(), diag);
    co_return listed.error();
  }
  struct found {
    std::string node_id, etag, text;
    bool present = false;
  };
  std::vector<found> records;
  for (const auto& o : *listed)
    if (auto id = node_of(where_, o.key)) records.push_back({std::move(*id), {}, {}, false});
  const auto limit = static_cast<std::size_t>(std::max(1, s3_.settings().max_concurrency));
  auto fetched = co_await net::fan_out(
      records.size(), limit,
      [&](std::size_t i, diagnostics& d) -> boost::asio::awaitable<result<void>> {
        auto& r = records[i];
        auto got = co_await packaging::read_small_object(act, s3_, where_.bucket, where_.key_of(r.node_id), d,
                                                         nullptr, false, &r.etag);
        if (!got) co_return got.error();
        if (*got) {  // else removed since the listing: gone from the pool
          r.text = std::move(**got);
          r.present = true;
        }
        co_return result<void>{};
      },
      diag);
  if (!fetched) {
    act.fail(fetched.error(), diag);
    co_return fetched.error();
  }
  pool_snapshot snapshot;
  for (auto& r : records) {
    if (!r.present) continue;
    diagnostics d;
    if (!add_object(snapshot, r.node_id, std::move(r.etag), r.text, d))
      act.log(action_types::pool::unreadable, {{"node", r.node_id}, {"reason", d.message}});
  }
  act.succeed({{"nodes", static_cast<std::uint64_t>(snapshot.nodes.size())},
               {"unreadable", static_cast<std::uint64_t>(snapshot.unreadable.size())}});
  co_return snapshot;
}

boost::asio::awaitable<result<std::optional<pool_entry>>> pool_store::read_one(tracing::action& parent,
                                                                               const std::string& node_id,
                                                                               diagnostics& diag) {
  using found = std::optional<pool_entry>;
  std::string etag;
  auto got = co_await packaging::read_small_object(parent, s3_, where_.bucket, where_.key_of(node_id), diag, nullptr,
                                                   false, &etag);
  if (!got) co_return got.error();
  if (!*got) co_return found{};
  auto record = parse_record(**got, node_id, diag);
  if (!record) co_return record.error();
  co_return found(pool_entry{std::move(*record), std::move(etag)});
}

boost::asio::awaitable<result<std::string>> pool_store::write(tracing::action& parent, const record_write& w,
                                                              diagnostics& diag) {
  const auto condition = w.if_match ? net::write_condition::if_match(*w.if_match) : net::write_condition::create_only();
  auto act = parent.child(action_types::pool::write, {{"node", w.node_id}, {"condition", condition.text()}});
  const auto body = w.body();
  auto etag = co_await s3_.put_object(act, where_.bucket, where_.key_of(w.node_id),
                                      net::request_body(std::span<const char>(body)), condition, diag);
  if (!etag) {
    act.fail(etag.error(), diag);
    co_return etag.error();
  }
  act.succeed({{"etag", *etag}});
  co_return etag;
}

boost::asio::awaitable<result<void>> pool_store::remove(tracing::action& parent, const pool_entry& entry,
                                                       diagnostics& diag) {
  const auto condition = net::write_condition::if_match(entry.etag);
  auto act = parent.child(action_types::pool::remove, {{"node", entry.record.node_id}, {"condition", condition.text()}});
  auto gone = co_await s3_.delete_object(act, where_.bucket, where_.key_of(entry.record.node_id), condition, diag);
  if (!gone) {
    act.fail(gone.error(), diag);
    co_return gone.error();
  }
  act.succeed();
  co_return result<void>{};
}

boost::asio::awaitable<result<std::optional<std::string>>> pool_store::read_key(tracing::action& parent,
                                                                               diagnostics& diag) {
  co_return co_await packaging::read_small_object(parent, s3_, where_.bucket, where_.ssh_key(), diag);
}

boost::asio::awaitable<result<void>> pool_store::create_key(tracing::action& parent, std::string_view text,
                                                            diagnostics& diag) {
  auto put = co_await s3_.put_object(parent, where_.bucket, where_.ssh_key(),
                                     net::request_body(std::span<const char>(text.data(), text.size())),
                                     net::write_condition::create_only(), diag);
  if (!put) co_return put.error();
  co_return result<void>{};
}

}  // namespace ferry::agent::pool
