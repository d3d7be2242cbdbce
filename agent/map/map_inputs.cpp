#include "agent/map/map_inputs.hpp"

#include "agent/error.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace ferry::agent {

namespace {

bool parse_int(std::string_view text, long long& out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

result<std::vector<std::string>> range_inputs(std::string_view spec, std::size_t max, diagnostics& diag) {
  const auto dots = spec.find("..");
  long long a = 0, b = 0;
  if (dots == std::string_view::npos || !parse_int(spec.substr(0, dots), a) || !parse_int(spec.substr(dots + 2), b)) {
    diag.set(fmt::format("--range {}: give two whole numbers as A..B (both included), e.g. 1..20", spec));
    return error_code(errc::bad_task_input);
  }
  if (b < a) {
    diag.set(fmt::format("--range {}: the end is below the start", spec));
    return error_code(errc::bad_task_input);
  }
  if (static_cast<unsigned long long>(b - a) >= max) {
    diag.set(fmt::format("--range {}: {} inputs, more than the {} a map takes", spec, b - a + 1, max));
    return error_code(errc::bad_task_input);
  }
  std::vector<std::string> out;
  for (long long i = a; i <= b; ++i) out.push_back(std::to_string(i));
  return out;
}

std::vector<std::string> line_inputs(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

result<std::vector<std::string>> file_inputs(const std::filesystem::path& file, diagnostics& diag) {
  std::string text;
  if (file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      diag.set(fmt::format("--inputs {}: cannot be read", file.string()));
      return error_code(errc::bad_task_input);
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = std::move(buffer).str();
  }
  auto lines = line_inputs(text);
  if (lines.empty()) {
    diag.set(fmt::format("--inputs {}: no inputs (one per line)", file.string()));
    return error_code(errc::bad_task_input);
  }
  return lines;
}

std::vector<std::string> task_argv(const std::vector<std::string>& command, std::string_view input) {
  std::vector<std::string> out;
  bool placed = false;
  for (const auto& word : command) {
    std::string w;
    for (std::size_t i = 0; i < word.size(); ++i) {
      if (word.compare(i, 2, "{}") == 0) {
        w.append(input);
        placed = true;
        ++i;
      } else {
        w.push_back(word[i]);
      }
    }
    out.push_back(std::move(w));
  }
  if (!placed) out.emplace_back(input);
  return out;
}

}  // namespace ferry::agent
