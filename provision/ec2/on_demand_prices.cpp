#include "provision/ec2/on_demand_prices.hpp"

#include <array>

namespace ferry::provision::ec2 {
namespace {

struct family_rate {
  std::string_view family;
  double per_vcpu;  // USD per vCPU-hour
  double per_gib;   // USD per GiB-hour (burstable families are priced by memory)
};

// us-east-1, Linux, on-demand. Fixed-performance families: the .large price over its 2 vCPUs.
// Burstable ones: the base price per GiB (t3.micro, 1 GiB, $0.0104) plus the surplus-credit price of a
// busy vCPU ($0.05 for t3/t3a, $0.04 for t4g).
constexpr std::array<family_rate, 27> rates = {{
    {"m5", 0.048, 0},     {"m5a", 0.043, 0},     {"m6i", 0.048, 0},   {"m6a", 0.0432, 0},
    {"m6g", 0.0385, 0},   {"m7i", 0.0504, 0},    {"m7a", 0.05796, 0}, {"m7g", 0.0408, 0},
    {"c5", 0.0425, 0},    {"c5a", 0.0385, 0},    {"c6i", 0.0425, 0},  {"c6a", 0.03825, 0},
    {"c6g", 0.034, 0},    {"c7i", 0.044625, 0},  {"c7a", 0.05132, 0}, {"c7g", 0.03625, 0},
    {"r5", 0.063, 0},     {"r5a", 0.0565, 0},    {"r6i", 0.063, 0},   {"r6a", 0.0567, 0},
    {"r6g", 0.0504, 0},   {"r7i", 0.06615, 0},   {"r7g", 0.05355, 0}, {"t3", 0.05, 0.0104},
    {"t3a", 0.05, 0.0094}, {"t4g", 0.04, 0.0084}, {"m5n", 0.0595, 0},
}};

}  // namespace

std::optional<double> on_demand_price(std::string_view type, int vcpus, double memory_gib) {
  const auto dot = type.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto family = type.substr(0, dot);
  for (const auto& rate : rates) {
    if (rate.family == family) return rate.per_vcpu * vcpus + rate.per_gib * memory_gib;
  }
  return std::nullopt;
}

}  // namespace ferry::provision::ec2
