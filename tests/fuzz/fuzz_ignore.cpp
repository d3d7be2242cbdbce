// The gitignore matcher on hostile patterns and paths: the input is an ignore file, then (after a NUL
// byte) the paths to decide, one per line. Every line is also tried as a lone pattern against every path,
// and ignored() must agree with the explanation `ferry pack --explain` would print for the same path.
#include "packaging/ignore_pattern.hpp"
#include "packaging/ignore_rules.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace packaging = ferry::packaging;

namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + 1);
  }
  return out;
}

void check(const packaging::ignore_rules& rules, std::string_view path, bool is_dir) {
  const bool ignored = rules.ignored(path, is_dir);
  const auto why = rules.explain(path, is_dir);
  if (ignored != (why && !why->negated)) std::abort();
  if (why) (void)why->describe();
}

// Decides every directory on the way down to `path`, as the tree walker would, entering each one that
// is not ignored (the walker never enters an ignored one).
void walk(packaging::ignore_rules& rules, std::string_view path, std::string_view patterns) {
  std::vector<std::string_view> parts;
  for (auto part : split(path, '/'))
    if (!part.empty()) parts.push_back(part);
  std::string relative;
  std::size_t entered = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    relative += (i ? "/" : "");
    relative += parts[i];
    const bool last = i + 1 == parts.size();
    check(rules, relative, !last);
    if (last) check(rules, relative, true);
    if (last || rules.ignored(relative, true)) break;
    // Deeper directories hold the same file again, so nested precedence is exercised too.
    rules.push_directory(relative, i % 2 ? patterns : "", i % 2 ? "" : patterns);
    ++entered;
  }
  while (entered--) rules.pop_directory();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const auto patterns = input.substr(0, nul);
  auto paths = split(nul == std::string_view::npos ? input : input.substr(nul + 1), '\n');
  auto lines = split(patterns, '\n');
  // Every line against every path is quadratic: bound it, so a slow input means a slow matcher.
  if (paths.size() > 32) paths.resize(32);
  if (lines.size() > 32) lines.resize(32);
  for (auto line : lines) {
    const auto pattern = packaging::ignore_pattern::parse(line);
    for (auto path : paths) {
      (void)packaging::wildmatch(line, path, true);
      (void)packaging::wildmatch(line, path, false);
      if (pattern && !path.empty() && path.front() != '/' && path.back() != '/') {
        (void)pattern->matches(path, false);
        (void)pattern->matches(path, true);
      }
    }
  }
  (void)packaging::parse_ignore_file(patterns);

  packaging::ignore_options options;
  for (auto line : lines) options.excludes.emplace_back(line);
  const packaging::outer_ignore_file outer{"../.gitignore", std::string(patterns), "sub"};
  packaging::ignore_rules rules(options, {&outer, 1});
  rules.push_directory("", patterns, "");
  for (auto path : paths) walk(rules, path, patterns);
  return 0;
}
