#pragma once
// Eliot task identity: a UUID4 per task and a task level (a path of positive integers) per message.
// serialize/parse follow eliot's serialize_task_id: "<uuid>@/<level>/<level>...".
#include "tracing/diagnostics.hpp"

#include <boost/container/small_vector.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::tracing {

using task_level = boost::container::small_vector<std::uint32_t, 8>;

struct task_uuid {
  std::array<char, 36> text{};
  std::string_view view() const { return {text.data(), text.size()}; }
  friend bool operator==(const task_uuid&, const task_uuid&) = default;
};

// A random (version 4) UUID from the OS's random source.
task_uuid new_task_uuid();

struct task_id {
  task_uuid uuid;
  task_level level;
};

std::string serialize_task_id(const task_uuid& uuid, const task_level& level);
result<task_id> parse_task_id(std::string_view text, diagnostics& diag);

}  // namespace ferry::tracing
