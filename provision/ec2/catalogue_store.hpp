#pragma once
// The catalogue of a region, kept on disk: <cache dir>/ec2-catalogue-<region>.json (the cache dir is
// $XDG_CACHE_HOME/ferry), used while younger than ec2.catalogue_ttl and fetched again after, with
// DescribeInstanceTypes and DescribeSpotPriceHistory (spot prices move within hours; the types rarely).
// The file is replaced atomically (a temporary file, then rename); one that is damaged, of another
// format or for another region is ignored and rewritten, never an error. The clock is a parameter so
// that tests can move time.
#include "provision/ec2/catalogue.hpp"
#include "provision/ec2/client.hpp"

#include <chrono>
#include <filesystem>
#include <functional>

namespace ferry::provision::ec2 {

using clock_fn = std::function<std::chrono::system_clock::time_point()>;

class catalogue_store {
 public:
  // `clock` empty: the system clock.
  catalogue_store(client& api, std::filesystem::path cache_dir, std::chrono::milliseconds ttl, clock_fn clock);

  // Traced as ec2:catalogue with field "source": "cache" or "api".
  asio::awaitable<result<catalogue>> get(tracing::action& parent, diagnostics& diag);

  std::filesystem::path file() const;

 private:
  std::optional<catalogue> cached(std::chrono::system_clock::time_point now) const;
  asio::awaitable<result<catalogue>> fetch(tracing::action& act, std::chrono::system_clock::time_point now,
                                           diagnostics& diag);

  client& api_;
  std::filesystem::path cache_dir_;
  std::chrono::milliseconds ttl_;
  clock_fn clock_;
};

// Writes `text` to `file` through a temporary file and a rename; false when that failed.
bool write_atomically(const std::filesystem::path& file, const std::string& text);

}  // namespace ferry::provision::ec2
