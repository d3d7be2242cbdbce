#include "agent/cli/json_output.hpp"

#include "tracing/json_text.hpp"

#include <cmath>

namespace ferry::agent {

std::string json_line(const boost::json::value& v) {
  tracing::text_buffer out;
  tracing::append_plain_json(out, v);
  return fmt::to_string(out);
}

double json_seconds(double seconds) { return std::round(seconds * 1000) / 1000; }

}  // namespace ferry::agent
