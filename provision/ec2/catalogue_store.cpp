#include "provision/ec2/catalogue_store.hpp"

#include "provision/state_file.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>


namespace ferry::provision::ec2 {
namespace {

namespace fs = std::filesystem;

std::int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

catalogue_store::catalogue_store(client& api, fs::path cache_dir, std::chrono::milliseconds ttl, clock_fn clock)
    : api_(api), cache_dir_(std::move(cache_dir)), ttl_(ttl), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::system_clock::now(); };
}

fs::path catalogue_store::file() const {
  return cache_dir_ / fmt::format("ec2-catalogue-{}.json", api_.where().region);
}

std::optional<catalogue> catalogue_store::cached(std::chrono::system_clock::time_point now) const {
  error_code unreadable;  // an unreadable cache is fetched again, like a missing one
  const auto text = read_state_file(file(), unreadable);
  if (!text) return std::nullopt;
  auto c = catalogue_from_json(*text);
  if (!c || c->region != api_.where().region || !is_fresh(*c, now, ttl_)) return std::nullopt;
  return c;
}

asio::awaitable<result<catalogue>> catalogue_store::fetch(tracing::action& act,
                                                          std::chrono::system_clock::time_point now,
                                                          diagnostics& diag) {
  auto types = co_await api_.describe_instance_types(act, diag);
  if (!types) co_return types.error();
  auto prices = co_await api_.describe_spot_price_history(act, now, diag);
  if (!prices) co_return prices.error();
  auto c = make_catalogue(api_.where().region, unix_seconds(now), std::move(*types), *prices);
  // The cache only saves time: a file that cannot be written costs the next command a fetch.
  std::error_code made;
  std::filesystem::create_directories(file().parent_path(), made);
  diagnostics not_stored;
  const bool stored = write_state_file(file(), to_json_text(c), not_stored).has_value();
  act.log(action_types::ec2::catalogue_stored,
          {{"file", file().string()}, {"stored", stored}, {"types", c.offers.size()}, {"prices", prices->size()}});
  co_return c;
}

asio::awaitable<result<catalogue>> catalogue_store::get(tracing::action& parent, diagnostics& diag) {
  const auto now = clock_();
  auto act = parent.child(action_types::ec2::catalogue, {{"region", api_.where().region}});
  if (auto hit = cached(now)) {
    act.succeed({{"source", "cache"}, {"types", hit->offers.size()}});
    co_return std::move(*hit);
  }
  auto fetched = co_await fetch(act, now, diag);
  act.finish(fetched, diag, {{"source", "api"}});
  co_return fetched;
}

}  // namespace ferry::provision::ec2
