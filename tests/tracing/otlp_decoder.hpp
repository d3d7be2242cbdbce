#pragma once
// The independent OTLP decoder (tests/peers/otlp_decode/check.js): protobufjs with the OTLP protos, its
// packages installed from the npm registry by their lockfile on first use (npm ci, under a lock, since test
// binaries run side by side), into that directory's node_modules (ignored by git).
#include "support/process.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace ferry::test {

inline std::filesystem::path otlp_decoder_dir() {
  return std::filesystem::path(FERRY_SOURCE_DIR) / "tests" / "peers" / "otlp_decode";
}

// Installs the decoder's packages unless node_modules is newer than the lockfile. False (and a test failure)
// when npm cannot: a machine without Node.js or the npm registry cannot run these tests.
inline bool install_otlp_decoder() {
  process_options o;
  o.cwd = otlp_decoder_dir();
  const auto r = run({"flock", (otlp_decoder_dir() / ".install.lock").string(), "sh", "-c",
                      "[ node_modules/.package-lock.json -nt package-lock.json ] || "
                      "npm ci --ignore-scripts --no-audit --no-fund --loglevel=error"},
                     o);
  if (r.exit_code != 0) ADD_FAILURE() << "npm ci in " << otlp_decoder_dir() << " failed: " << r.out << r.err;
  return r.exit_code == 0;
}

// The decoder's summary of an OTLP/JSON file: lines, span_count, unresolved_parents, duplicate_span_ids,
// problems, spans [{name, spanId, parentSpanId, traceId, service, status, kind, level}]. A decoding problem
// fails the test.
inline boost::json::object decode_otlp(const std::filesystem::path& file) {
  if (!install_otlp_decoder()) return {};
  const auto r = run({"node", (otlp_decoder_dir() / "check.js").string(), file.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out.substr(0, 4000) << r.err;
  boost::system::error_code ec;
  auto doc = boost::json::parse(r.out, ec);
  if (ec || !doc.is_object()) {
    ADD_FAILURE() << "the decoder printed no summary: " << r.out.substr(0, 4000) << r.err;
    return {};
  }
  return std::move(doc.as_object());
}

}  // namespace ferry::test
