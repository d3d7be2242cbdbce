#pragma once
// JSON that ferry prints for programs to read (map's task lines, `pack --json`): one line each, numbers
// as people and parsers both expect them. boost::json::serialize writes a double as `2.05328945E-1`;
// these are plain decimals, and durations are kept to the millisecond (`0.205`).
#include <boost/json/value.hpp>

#include <string>

namespace ferry::agent {

// The value as one line of JSON (no newline), doubles in plain decimals, nothing redacted.
std::string json_line(const boost::json::value& v);

// A duration in seconds, rounded to the millisecond.
double json_seconds(double seconds);

}  // namespace ferry::agent
