#pragma once
// The catalogue: every instance type of a region with its vCPUs, memory, architectures, whether it is
// sold on demand and as spot, and its current spot price; and the choice of the cheapest type for a
// spec. Pure data and functions: catalogue_store.hpp fetches it and keeps it on disk.
//
// Prices: a spot type is priced at its lowest current spot price among the region's availability
// zones (EC2 picks the zone from the subnet, so this is what the cheapest zone costs; the zone is kept
// beside it). On-demand types are priced from the built-in table of on_demand_prices.hpp. Spot picks
// consider only types with a spot price; on-demand picks consider types of a known family first, and
// the others only when none of those fits, smallest first. Ties go to fewer vCPUs, then less memory,
// then the current generation, then the name.
#include "provision/ec2/response.hpp"
#include "tracing/diagnostics.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::provision::ec2 {

struct offer {
  std::string type;
  int vcpus = 0;
  std::int64_t memory_mib = 0;
  std::vector<std::string> architectures;
  bool on_demand = false;  // sold on demand
  bool spot = false;       // sold as spot
  bool current_generation = false;
  std::optional<double> spot_price;  // lowest current price, USD per hour
  std::string spot_zone;             // where that price is
};

struct catalogue {
  std::string region;
  std::int64_t fetched_at = 0;  // unix seconds
  std::vector<offer> offers;    // sorted by type
};

// Joins DescribeInstanceTypes and DescribeSpotPriceHistory. Prices of the same type and zone keep the
// latest (the history may hold older ones); prices that are not positive, or not for Linux/UNIX, are
// dropped.
catalogue make_catalogue(std::string region, std::int64_t fetched_at, std::vector<instance_type_info> types,
                         const std::vector<spot_price>& prices);

// The cache file's text, and back. A document that is damaged or of another format is nullopt.
std::string to_json_text(const catalogue& c);
std::optional<catalogue> catalogue_from_json(std::string_view text);

// Younger than `ttl` at `now`. One from the future (a clock set back) is stale: its age is unknown.
bool is_fresh(const catalogue& c, std::chrono::system_clock::time_point now, std::chrono::milliseconds ttl);

struct requirements {
  int min_cpus = 0;
  double min_memory_gib = 0;
  bool spot = false;
  std::string architecture = "x86_64";
};

struct choice {
  std::string type;
  int vcpus = 0;
  std::int64_t memory_mib = 0;
  std::optional<double> price;  // USD per hour: the spot price, or the on-demand estimate
  std::string price_source;     // "spot price history", "built-in on-demand table" or "none"
  std::string zone;             // spot: the zone of that price
};

// The cheapest offer meeting `need`; provision::errc::no_matching_type, with a message that says what
// was asked and what the largest candidate offers, when none does.
result<choice> cheapest(const catalogue& c, const requirements& need, diagnostics& diag);

}  // namespace ferry::provision::ec2
