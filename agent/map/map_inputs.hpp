#pragma once
// The inputs of `ferry map` and how each becomes a command: `--range A..B` (both ends included) or
// `--inputs FILE` (one input per line, `-` for stdin), and `{}` in the command's words replaced by the
// input (with no `{}` anywhere, the input is appended as the last word).
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent {

// "1..20" -> "1", ..., "20". Negative numbers are allowed; B below A, or more than `max` inputs, fail.
result<std::vector<std::string>> range_inputs(std::string_view spec, std::size_t max, diagnostics& diag);

// The non-empty lines of the text (a trailing \r is dropped), in order.
std::vector<std::string> line_inputs(std::string_view text);

// line_inputs of a file ("-": standard input); fails naming the file.
result<std::vector<std::string>> file_inputs(const std::filesystem::path& file, diagnostics& diag);

std::vector<std::string> task_argv(const std::vector<std::string>& command, std::string_view input);

}  // namespace ferry::agent
