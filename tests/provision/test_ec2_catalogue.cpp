// The catalogue without I/O: joining types and spot prices, the cache file's format, freshness, and
// the choice of the cheapest type.
#include "provision/ec2/catalogue.hpp"
#include "provision/ec2/on_demand_prices.hpp"
#include "provision/error.hpp"

#include <gtest/gtest.h>

namespace ferry::provision::ec2 {
namespace {

using namespace std::chrono_literals;

instance_type_info type(std::string name, int vcpus, std::int64_t mib, std::string arch = "x86_64",
                        std::vector<std::string> usage = {"on-demand", "spot"}) {
  return {std::move(name), vcpus, mib, {std::move(arch)}, std::move(usage), true};
}

spot_price price(std::string type, std::string zone, double usd, std::string when = "2024-05-01T12:00:00.000Z",
                 std::string product = "Linux/UNIX") {
  return {std::move(type), std::move(zone), std::move(product), usd, std::move(when)};
}

catalogue sample() {
  return make_catalogue("us-east-1", 1714564800,
                        {type("m5.large", 2, 8192), type("c6a.large", 2, 4096), type("c6i.xlarge", 4, 8192),
                         type("t3a.medium", 2, 4096), type("c6g.large", 2, 4096, "arm64"),
                         type("r5.large", 2, 16384, "x86_64", {"on-demand"}), type("zz9.large", 2, 4096),
                         type("zz9.4xlarge", 64, 1 << 20)},
                        {price("m5.large", "us-east-1a", 0.04), price("m5.large", "us-east-1b", 0.03),
                         price("c6a.large", "us-east-1a", 0.05), price("c6i.xlarge", "us-east-1c", 0.045),
                         price("t3a.medium", "us-east-1a", 0.012), price("c6g.large", "us-east-1a", 0.001),
                         price("zz9.large", "us-east-1a", 0.0001, "2024-05-01T12:00:00.000Z", "Windows")});
}

TEST(ec2_catalogue, joins_types_with_their_lowest_current_spot_price_in_any_zone) {
  const auto c = make_catalogue(
      "eu-west-1", 42, {type("m5.large", 2, 8192), type("c5.large", 2, 4096)},
      {price("m5.large", "eu-west-1a", 0.05, "2024-05-01T10:00:00.000Z"),
       price("m5.large", "eu-west-1a", 0.09, "2024-05-01T11:00:00.000Z"),  // the later price in 1a
       price("m5.large", "eu-west-1b", 0.07, "2024-05-01T10:30:00.000Z"), price("m5.large", "eu-west-1c", 0, ""),
       price("m5.large", "eu-west-1c", 0.01, "", "Windows")});
  EXPECT_EQ(c.region, "eu-west-1");
  EXPECT_EQ(c.fetched_at, 42);
  ASSERT_EQ(c.offers.size(), 2u);
  EXPECT_EQ(c.offers[0].type, "c5.large") << "sorted by type";
  EXPECT_FALSE(c.offers[0].spot_price);
  const auto& m5 = c.offers[1];
  ASSERT_TRUE(m5.spot_price);
  EXPECT_DOUBLE_EQ(*m5.spot_price, 0.07);
  EXPECT_EQ(m5.spot_zone, "eu-west-1b");
  EXPECT_TRUE(m5.spot);
  EXPECT_TRUE(m5.on_demand);
}

TEST(ec2_catalogue, round_trips_through_its_cache_file_text) {
  const auto c = sample();
  const auto back = catalogue_from_json(to_json_text(c));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->region, c.region);
  EXPECT_EQ(back->fetched_at, c.fetched_at);
  ASSERT_EQ(back->offers.size(), c.offers.size());
  for (std::size_t i = 0; i < c.offers.size(); ++i) {
    const auto &a = c.offers[i], &b = back->offers[i];
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.vcpus, b.vcpus);
    EXPECT_EQ(a.memory_mib, b.memory_mib);
    EXPECT_EQ(a.architectures, b.architectures);
    EXPECT_EQ(a.on_demand, b.on_demand);
    EXPECT_EQ(a.spot, b.spot);
    EXPECT_EQ(a.current_generation, b.current_generation);
    EXPECT_EQ(a.spot_price, b.spot_price);
    EXPECT_EQ(a.spot_zone, b.spot_zone);
  }
}

TEST(ec2_catalogue, a_damaged_or_foreign_cache_file_is_ignored) {
  const auto good = to_json_text(sample());
  for (const std::string& text :
       {std::string(), std::string("{"), good.substr(0, good.size() / 2), std::string("[]"),
        std::string(R"({"format":"ferry-ec2-catalogue-0","region":"r","fetched_at":1,"offers":[]})"),
        std::string(R"({"format":"ferry-ec2-catalogue-1","region":"r","fetched_at":"yesterday","offers":[]})"),
        std::string(
            R"({"format":"ferry-ec2-catalogue-1","region":"r","fetched_at":1,"offers":[{"type":"m5.large"}]})")})
    EXPECT_FALSE(catalogue_from_json(text)) << text;
}

TEST(ec2_catalogue, is_fresh_for_its_ttl_and_never_when_from_the_future) {
  catalogue c;
  c.fetched_at = 1000;
  const auto at = [](std::int64_t s) { return std::chrono::system_clock::time_point(std::chrono::seconds(s)); };
  EXPECT_TRUE(is_fresh(c, at(1000), 4h));
  EXPECT_TRUE(is_fresh(c, at(1000 + 4 * 3600 - 1), 4h));
  EXPECT_FALSE(is_fresh(c, at(1000 + 4 * 3600), 4h));
  EXPECT_FALSE(is_fresh(c, at(999), 4h));
}

TEST(ec2_catalogue, on_demand_estimates_come_from_the_family_rate) {
  EXPECT_DOUBLE_EQ(*on_demand_price("m5.large", 2, 8), 0.096);
  EXPECT_DOUBLE_EQ(*on_demand_price("m5.4xlarge", 16, 64), 0.768);
  EXPECT_DOUBLE_EQ(*on_demand_price("c6i.large", 2, 4), 0.085);
  // A busy t3.medium: $0.0416 base plus two vCPUs of surplus credits.
  EXPECT_DOUBLE_EQ(*on_demand_price("t3.medium", 2, 4), 0.0416 + 0.1);
  EXPECT_FALSE(on_demand_price("x2iedn.32xlarge", 128, 4096));
  EXPECT_FALSE(on_demand_price("m5", 2, 8)) << "not a type";
}

TEST(ec2_catalogue, the_cheapest_spot_type_meeting_the_spec_wins) {
  diagnostics diag;
  const auto pick = cheapest(sample(), {.min_cpus = 2, .min_memory_gib = 4, .spot = true}, diag);
  ASSERT_TRUE(pick) << diag.message;
  // c6g.large is cheaper but arm64; zz9.large's only price is for Windows.
  EXPECT_EQ(pick->type, "t3a.medium");
  EXPECT_DOUBLE_EQ(*pick->price, 0.012);
  EXPECT_EQ(pick->price_source, "spot price history");
  EXPECT_EQ(pick->zone, "us-east-1a");
  EXPECT_EQ(pick->vcpus, 2);
  EXPECT_EQ(pick->memory_mib, 4096);

  const auto bigger = cheapest(sample(), {.min_cpus = 3, .min_memory_gib = 4, .spot = true}, diag);
  ASSERT_TRUE(bigger) << diag.message;
  EXPECT_EQ(bigger->type, "c6i.xlarge");

  const auto arm = cheapest(sample(), {.min_cpus = 2, .spot = true, .architecture = "arm64"}, diag);
  ASSERT_TRUE(arm) << diag.message;
  EXPECT_EQ(arm->type, "c6g.large");
}

TEST(ec2_catalogue, on_demand_picks_rank_by_the_table_with_busy_burstables_dearer) {
  diagnostics diag;
  const auto pick = cheapest(sample(), {.min_cpus = 2, .min_memory_gib = 4}, diag);
  ASSERT_TRUE(pick) << diag.message;
  EXPECT_EQ(pick->type, "c6a.large");  // 0.0765, below t3a.medium's 0.1376 under load and m5.large's 0.096
  EXPECT_DOUBLE_EQ(*pick->price, 0.0765);
  EXPECT_EQ(pick->price_source, "built-in on-demand table");
  EXPECT_EQ(pick->zone, "");

  const auto memory = cheapest(sample(), {.min_cpus = 1, .min_memory_gib = 12}, diag);
  ASSERT_TRUE(memory) << diag.message;
  EXPECT_EQ(memory->type, "r5.large") << "on-demand only, and the one with 16 GiB";
}

TEST(ec2_catalogue, unknown_families_are_picked_on_demand_only_when_no_known_one_fits) {
  diagnostics diag;
  const auto pick = cheapest(sample(), {.min_cpus = 32, .min_memory_gib = 64}, diag);
  ASSERT_TRUE(pick) << diag.message;
  EXPECT_EQ(pick->type, "zz9.4xlarge");
  EXPECT_FALSE(pick->price);
  EXPECT_EQ(pick->price_source, "none");
}

TEST(ec2_catalogue, ties_go_to_the_smaller_type) {
  const auto c = make_catalogue("r", 0,
                                {type("b.xlarge", 4, 8192), type("a.2xlarge", 8, 8192), type("c.large", 2, 8192)},
                                {price("b.xlarge", "z", 1), price("a.2xlarge", "z", 1), price("c.large", "z", 1)});
  diagnostics diag;
  const auto pick = cheapest(c, {.min_cpus = 2, .spot = true}, diag);
  ASSERT_TRUE(pick) << diag.message;
  EXPECT_EQ(pick->type, "c.large");
}

TEST(ec2_catalogue, no_matching_type_says_what_was_asked_and_what_there_is) {
  diagnostics diag;
  const auto pick = cheapest(sample(), {.min_cpus = 8, .min_memory_gib = 16, .spot = true}, diag);
  ASSERT_FALSE(pick);
  EXPECT_EQ(pick.error(), make_error_code(errc::no_matching_type));
  for (std::string_view words : {"no x86_64 instance type sold as spot", "us-east-1", "at least 8 vCPUs and 16 GiB",
                                 "at most 4 vCPUs and 8 GiB", "ec2.min_cpus", "ec2.instance_type"})
    EXPECT_NE(diag.message.find(words), std::string::npos) << words << " in: " << diag.message;

  const auto none = cheapest(catalogue{"r", 0, {}}, {.min_cpus = 1}, diag);
  ASSERT_FALSE(none);
  EXPECT_NE(diag.message.find("there is none at all"), std::string::npos) << diag.message;
}

}  // namespace
}  // namespace ferry::provision::ec2
