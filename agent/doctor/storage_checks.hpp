#pragma once
// The storage half of `ferry doctor`: the credentials and where they were found, the endpoint and whether
// it answers, the clock against storage's, and whether the storage.url prefix can be listed and written.
// The endpoint goes first; once it answers, the clock and the bucket checks run side by side.
#include "agent/cli/command_context.hpp"
#include "agent/doctor/check.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>

namespace ferry::agent::doctor {

struct storage_report {
  check_result credentials, endpoint, clock, list, write;
};

struct storage_options {
  std::chrono::milliseconds clock_offset{0};  // --clock-offset: added to ferry's clock for the skew and signing
  std::string clock_offset_text;              // as given, for the report; empty without the flag
};

boost::asio::awaitable<void> check_storage(tracing::action& parent, const command_context& ctx,
                                           const storage_options& options, storage_report& out);

}  // namespace ferry::agent::doctor
