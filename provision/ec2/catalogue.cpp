#include "provision/ec2/catalogue.hpp"

#include "provision/ec2/on_demand_prices.hpp"
#include "provision/error.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace ferry::provision::ec2 {
namespace {

namespace json = boost::json;

constexpr std::string_view format_name = "ferry-ec2-catalogue-1";

bool has(const std::vector<std::string>& list, std::string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

struct zone_price {
  double price = 0;
  std::string timestamp;  // ISO 8601 compares as text
};

// type -> zone -> the latest price.
std::map<std::string, std::map<std::string, zone_price>> latest_prices(const std::vector<spot_price>& prices) {
  std::map<std::string, std::map<std::string, zone_price>> out;
  for (const auto& p : prices) {
    if (!(p.price > 0) || !p.product_description.starts_with("Linux/UNIX")) continue;
    auto& slot = out[p.instance_type][p.availability_zone];
    if (slot.timestamp.empty() || p.timestamp >= slot.timestamp) slot = {p.price, p.timestamp};
  }
  return out;
}

json::object offer_json(const offer& o) {
  json::object out{{"type", o.type},           {"vcpus", o.vcpus},       {"memory_mib", o.memory_mib},
                   {"on_demand", o.on_demand}, {"spot", o.spot},         {"current", o.current_generation},
                   {"spot_zone", o.spot_zone}};
  json::array arch;
  for (const auto& a : o.architectures) arch.emplace_back(a);
  out["architectures"] = std::move(arch);
  if (o.spot_price) out["spot_price"] = *o.spot_price;
  return out;
}

// Reads one offer; false when a field is missing or of the wrong type.
bool read_offer(const json::value& v, offer& o) {
  const auto* obj = v.if_object();
  if (!obj) return false;
  try {
    o.type = json::value_to<std::string>(obj->at("type"));
    o.vcpus = json::value_to<int>(obj->at("vcpus"));
    o.memory_mib = json::value_to<std::int64_t>(obj->at("memory_mib"));
    o.on_demand = obj->at("on_demand").as_bool();
    o.spot = obj->at("spot").as_bool();
    o.current_generation = obj->at("current").as_bool();
    o.spot_zone = json::value_to<std::string>(obj->at("spot_zone"));
    o.architectures = json::value_to<std::vector<std::string>>(obj->at("architectures"));
    if (const auto* price = obj->if_contains("spot_price")) o.spot_price = json::value_to<double>(*price);
  } catch (const std::exception&) {
    // A damaged cache file is no error, only a cold cache.
    return false;
  }
  return true;
}

// What an offer costs under `need`, or nullopt when it cannot be had that way at a known price.
std::optional<double> price_of(const offer& o, bool spot) {
  if (spot) return o.spot_price;
  return on_demand_price(o.type, o.vcpus, static_cast<double>(o.memory_mib) / 1024.0);
}

bool meets(const offer& o, const requirements& need) {
  if (need.spot ? !o.spot : !o.on_demand) return false;
  if (!need.architecture.empty() && !has(o.architectures, need.architecture)) return false;
  return o.vcpus >= need.min_cpus && static_cast<double>(o.memory_mib) >= need.min_memory_gib * 1024.0;
}

// Smaller is better: known price first, then price, vCPUs, memory, current generation, name.
auto rank(const offer& o, const std::optional<double>& price) {
  return std::make_tuple(!price.has_value(), price.value_or(0), o.vcpus, o.memory_mib, !o.current_generation,
                         std::string_view(o.type));
}

choice choice_of(const offer& o, const std::optional<double>& price, bool spot) {
  choice c{o.type, o.vcpus, o.memory_mib, price, "none", {}};
  if (price) c.price_source = spot ? "spot price history" : "built-in on-demand table";
  if (spot) c.zone = o.spot_zone;
  return c;
}

error_code no_match(const catalogue& c, const requirements& need, diagnostics& diag) {
  int most_cpus = 0;
  std::int64_t most_memory = 0;
  std::size_t sold = 0;
  for (const auto& o : c.offers) {
    requirements any = need;
    any.min_cpus = 0;
    any.min_memory_gib = 0;
    if (!meets(o, any) || (need.spot && !o.spot_price)) continue;
    ++sold;
    most_cpus = std::max(most_cpus, o.vcpus);
    most_memory = std::max(most_memory, o.memory_mib);
  }
  const auto how = need.spot ? "as spot (with a spot price)" : "on demand";
  const auto largest = sold == 0 ? std::string("there is none at all")
                                 : fmt::format("the {} there are have at most {} vCPUs and {:g} GiB", sold, most_cpus,
                                               static_cast<double>(most_memory) / 1024.0);
  diag.set(fmt::format("no {} instance type sold {} in {} has at least {} vCPUs and {:g} GiB of memory ({}): "
                       "lower ec2.min_cpus or ec2.min_memory_gib, change ec2.spot or ec2.architecture, or name "
                       "a type with ec2.instance_type",
                       need.architecture.empty() ? std::string("") : need.architecture, how, c.region, need.min_cpus,
                       need.min_memory_gib, largest));
  return make_error_code(errc::no_matching_type);
}

}  // namespace

catalogue make_catalogue(std::string region, std::int64_t fetched_at, std::vector<instance_type_info> types,
                         const std::vector<spot_price>& prices) {
  const auto latest = latest_prices(prices);
  catalogue c{std::move(region), fetched_at, {}};
  c.offers.reserve(types.size());
  for (auto& t : types) {
    offer o{std::move(t.name), t.vcpus, t.memory_mib, std::move(t.architectures), has(t.usage_classes, "on-demand"),
            has(t.usage_classes, "spot"), t.current_generation, std::nullopt, {}};
    if (const auto it = latest.find(o.type); it != latest.end()) {
      for (const auto& [zone, p] : it->second) {
        if (!o.spot_price || p.price < *o.spot_price) {
          o.spot_price = p.price;
          o.spot_zone = zone;
        }
      }
    }
    c.offers.push_back(std::move(o));
  }
  std::sort(c.offers.begin(), c.offers.end(), [](const offer& a, const offer& b) { return a.type < b.type; });
  return c;
}

std::string to_json_text(const catalogue& c) {
  json::array offers;
  offers.reserve(c.offers.size());
  for (const auto& o : c.offers) offers.emplace_back(offer_json(o));
  const json::object doc{{"format", format_name},
                         {"region", c.region},
                         {"fetched_at", c.fetched_at},
                         {"offers", std::move(offers)}};
  return json::serialize(doc);
}

std::optional<catalogue> catalogue_from_json(std::string_view text) {
  error_code ec;
  const auto doc = json::parse(text, ec);
  const auto* obj = ec ? nullptr : doc.if_object();
  const auto* format = obj ? obj->if_contains("format") : nullptr;
  if (!format || !format->is_string() || format->as_string() != format_name) return std::nullopt;
  const auto* region = obj->if_contains("region");
  const auto* fetched = obj->if_contains("fetched_at");
  const auto* offers = obj->if_contains("offers");
  if (!region || !region->is_string() || !fetched || !fetched->is_int64() || !offers || !offers->is_array())
    return std::nullopt;
  catalogue c{std::string(region->as_string()), fetched->as_int64(), {}};
  for (const auto& v : offers->as_array()) {
    offer o;
    if (!read_offer(v, o)) return std::nullopt;
    c.offers.push_back(std::move(o));
  }
  return c;
}

bool is_fresh(const catalogue& c, std::chrono::system_clock::time_point now, std::chrono::milliseconds ttl) {
  const auto fetched = std::chrono::system_clock::time_point(std::chrono::seconds(c.fetched_at));
  return fetched <= now && now - fetched < ttl;
}

result<choice> cheapest(const catalogue& c, const requirements& need, diagnostics& diag) {
  const offer* best = nullptr;
  std::optional<double> best_price;
  for (const auto& o : c.offers) {
    if (!meets(o, need)) continue;
    const auto price = price_of(o, need.spot);
    if (need.spot && !price) continue;  // not on sale as spot right now
    if (!best || rank(o, price) < rank(*best, best_price)) {
      best = &o;
      best_price = price;
    }
  }
  if (!best) return no_match(c, need, diag);
  return choice_of(*best, best_price, need.spot);
}

}  // namespace ferry::provision::ec2
