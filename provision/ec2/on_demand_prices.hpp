#pragma once
// Estimated on-demand prices, for ranking instance types. EC2's own API has no on-demand prices (the
// Price List API is another service, with its own endpoint and permissions), so ferry carries a small
// table: us-east-1 Linux list prices (USD per hour, 2024) of the common current-generation families,
// as a rate per vCPU and per GiB. Within these families AWS prices sizes linearly, so the rate gives
// every size, metal included. Other regions cost more or less, but in proportion, and only the order
// matters for picking the cheapest type.
//
// Burstable families (t3, t3a, t4g) are priced as if their CPUs were busy all the time: ferry runs
// batch work, and in unlimited mode (their default) a busy vCPU costs surplus credits on top of the
// base price, which makes a t3.medium dearer than a c6a.large under load.
//
// Types of families not in the table have no estimate: the catalogue offers them on demand only when
// no type of a known family meets the spec.
#include <optional>
#include <string_view>

namespace ferry::provision::ec2 {

// The estimated hourly on-demand price of `type` ("c6i.2xlarge"), or nullopt for an unknown family.
std::optional<double> on_demand_price(std::string_view type, int vcpus, double memory_gib);

}  // namespace ferry::provision::ec2
