#pragma once
// Reading trace files back: JSON lines from any number of files (one per process), kept with the file and
// line each came from. A malformed line is reported by file:line and skipped; the rest is still used.
#include "tracing/diagnostics.hpp"

#include <boost/json/object.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ferry::tracing {

struct trace_message {
  boost::json::object fields;
  std::size_t file = 0;  // index into trace_set::files
  std::size_t line = 0;  // 1-based
  double timestamp = 0;
};

struct trace_set {
  std::vector<std::filesystem::path> files;
  std::vector<trace_message> messages;
  std::vector<std::string> problems;  // "file:line: why" for each skipped line
};

// Reads each file with the node programs' files written beside it (<stem>.node-*.jsonl), or each *.jsonl
// file inside a directory. An unreadable file is an error.
result<trace_set> read_traces(const std::vector<std::filesystem::path>& paths, diagnostics& diag);

}  // namespace ferry::tracing
