#include "packaging/ignore_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace ferry::packaging {
namespace {

constexpr std::array<std::string_view, 4> builtin_excludes = {
    "__pycache__/", "*.pyc", ".ipynb_checkpoints/", ".venv/",
};

std::string_view name_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view parent_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash);
}

// Patterns in a directory's ignore file see paths relative to that directory.
std::string_view relative_to(std::string_view dir, std::string_view path) {
  return dir.empty() ? path : path.substr(dir.size() + 1);
}

}  // namespace

std::string explanation::describe() const {
  switch (from) {
    case origin::file: return fmt::format("{}:{}: {}", file, line, pattern);
    case origin::config: return fmt::format("config packaging.excludes[{}]: {}", line, pattern);
    case origin::builtin: return fmt::format("default: {}", pattern);
    case origin::always: return fmt::format("always: {}", pattern);
  }
  return pattern;
}

std::span<const std::string_view> default_excludes() { return builtin_excludes; }

ignore_rules::ignore_rules(const ignore_options& options, std::span<const outer_ignore_file> outer)
    : always_git_{explanation::origin::always, {}, 0, ".git", false} {
  for (const auto& file : outer) {
    outer_list list{file.root_path.empty() ? std::string() : file.root_path + "/", {}};
    for (auto& [pattern, line] : parse_ignore_file(file.contents)) {
      explanation source{explanation::origin::file, file.name, line, pattern.text(), pattern.negated()};
      list.rules.push_back({std::move(pattern), std::move(source)});
    }
    outer_.push_back(std::move(list));
  }
  auto add = [this](explanation::origin from, std::string_view text, std::size_t position) {
    auto pattern = ignore_pattern::parse(text);
    if (!pattern) return;
    explanation source{from, {}, position, pattern->text(), pattern->negated()};
    root_rules_.push_back({std::move(*pattern), std::move(source)});
  };
  if (options.defaults) {
    for (std::size_t i = 0; i < builtin_excludes.size(); ++i) {
      add(explanation::origin::builtin, builtin_excludes[i], i + 1);
    }
  }
  for (std::size_t i = 0; i < options.excludes.size(); ++i) {
    add(explanation::origin::config, options.excludes[i], i + 1);
  }
}

void ignore_rules::push_directory(std::string_view relative_dir, std::string_view gitignore,
                                  std::string_view ferryignore, bool through_symlink) {
  if (levels_.empty() && !relative_dir.empty()) throw std::logic_error("ignore_rules: enter the root (\"\") first");
  if (!levels_.empty()) check_parent(relative_dir, "push_directory");

  level next{std::string(relative_dir), {}, std::nullopt};
  if (!levels_.empty()) {
    // Inside an excluded directory this is the outer directory's explanation, as in git.
    const auto* decided = decide(relative_dir, !through_symlink);
    if (decided && !decided->negated) next.excluded_by = *decided;
  }
  // Like git, which stops reading ignore files below an excluded directory: none of them can matter.
  if (!next.excluded_by) {
    const std::string prefix = relative_dir.empty() ? std::string() : std::string(relative_dir) + "/";
    for (const auto& [name, contents] : {std::pair{".gitignore", gitignore}, std::pair{".ferryignore", ferryignore}}) {
      for (auto& [pattern, line] : parse_ignore_file(contents)) {
        explanation source{explanation::origin::file, prefix + name, line, pattern.text(), pattern.negated()};
        next.rules.push_back({std::move(pattern), std::move(source)});
      }
    }
  }
  levels_.push_back(std::move(next));
}

void ignore_rules::pop_directory() {
  if (levels_.empty()) throw std::logic_error("ignore_rules: pop_directory without push_directory");
  levels_.pop_back();
}

bool ignore_rules::ignored(std::string_view relative_path, bool is_dir) const {
  check_parent(relative_path, "ignored");
  const auto* decided = decide(relative_path, is_dir);
  return decided && !decided->negated;
}

std::optional<explanation> ignore_rules::explain(std::string_view relative_path, bool is_dir) const {
  check_parent(relative_path, "explain");
  if (const auto* decided = decide(relative_path, is_dir)) return *decided;
  return std::nullopt;
}

const explanation* ignore_rules::decide(std::string_view relative_path, bool is_dir) const {
  // git skips every entry named ".git" before it looks at any pattern (dir.c, treat_path).
  if (name_of(relative_path) == ".git") return &always_git_;
  if (levels_.back().excluded_by) return &*levels_.back().excluded_by;
  for (auto dir = levels_.rbegin(); dir != levels_.rend(); ++dir) {
    const auto path = relative_to(dir->dir, relative_path);
    for (auto r = dir->rules.rbegin(); r != dir->rules.rend(); ++r) {
      if (r->pattern.matches(path, is_dir)) return &r->source;
    }
  }
  if (!outer_.empty()) {
    std::string from_base;
    for (const auto& list : outer_) {
      from_base.assign(list.prefix).append(relative_path);
      for (auto r = list.rules.rbegin(); r != list.rules.rend(); ++r) {
        if (r->pattern.matches(from_base, is_dir)) return &r->source;
      }
    }
  }
  for (auto r = root_rules_.rbegin(); r != root_rules_.rend(); ++r) {
    if (r->pattern.matches(relative_path, is_dir)) return &r->source;
  }
  return nullptr;
}

std::optional<excluded_ancestor> ignore_rules::ancestor_excluded() const {
  // Each list's prefix is the root's path from the list's base directory; an ancestor `up` levels above
  // the root is the prefix less its last `up` components, and a file speaks of it only when that is not
  // empty (the ancestor lies strictly below the file's directory).
  std::vector<std::vector<std::string_view>> components;
  std::size_t deepest = 0;
  for (const auto& list : outer_) {
    auto& c = components.emplace_back();
    std::string_view rest(list.prefix);
    while (!rest.empty()) {
      const auto slash = rest.find('/');
      c.push_back(rest.substr(0, slash));
      rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash + 1);
    }
    deepest = std::max(deepest, c.size());
  }
  std::string path;
  for (std::size_t up = deepest; up-- > 0;) {
    for (std::size_t i = 0; i < outer_.size(); ++i) {
      const auto& c = components[i];
      if (c.size() <= up) continue;
      path.clear();
      for (std::size_t k = 0; k < c.size() - up; ++k) path.append(k ? "/" : "").append(c[k]);
      const auto& rules = outer_[i].rules;
      const auto r =
          std::find_if(rules.rbegin(), rules.rend(), [&](const rule& x) { return x.pattern.matches(path, true); });
      if (r == rules.rend()) continue;
      if (!r->source.negated) return excluded_ancestor{up, r->source};
      break;  // re-included by the nearest file that speaks of it: go on to the next directory down
    }
  }
  return std::nullopt;
}

void ignore_rules::check_parent(std::string_view relative_path, const char* what) const {
  if (levels_.empty()) throw std::logic_error(fmt::format("ignore_rules::{}: no directory entered", what));
  if (relative_path.empty() || parent_of(relative_path) != levels_.back().dir) {
    throw std::logic_error(fmt::format("ignore_rules::{}: '{}' is not directly in '{}'", what,
                                       relative_path, levels_.back().dir));
  }
}

}  // namespace ferry::packaging
