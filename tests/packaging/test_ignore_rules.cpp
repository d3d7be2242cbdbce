#include "packaging/error.hpp"
#include "packaging/ignore_pattern.hpp"
#include "packaging/ignore_rules.hpp"
#include "packaging/tree_walker.hpp"

#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
using test::temp_dir;

// ---- one pattern ----------------------------------------------------------------------------------------

bool matches(std::string_view line, std::string_view path, bool is_dir = false) {
  const auto pattern = ignore_pattern::parse(line);
  return pattern && pattern->matches(path, is_dir);
}

TEST(ignore_pattern, comments_and_blank_lines_are_not_patterns) {
  EXPECT_FALSE(ignore_pattern::parse(""));
  EXPECT_FALSE(ignore_pattern::parse("# a comment"));
  EXPECT_FALSE(ignore_pattern::parse("#h"));
  EXPECT_FALSE(ignore_pattern::parse("   "));
  EXPECT_FALSE(ignore_pattern::parse("!"));
  EXPECT_TRUE(matches("\\#h", "#h"));
  EXPECT_TRUE(matches(" #h", " #h"));  // only a '#' in the first column starts a comment
}

TEST(ignore_pattern, trailing_spaces_are_trimmed_unless_escaped) {
  EXPECT_TRUE(matches("t  ", "t"));
  EXPECT_FALSE(matches("t  ", "t "));
  EXPECT_TRUE(matches("t\\ ", "t "));
  EXPECT_FALSE(matches("t\\ ", "t"));
  EXPECT_EQ(ignore_pattern::parse("t\\   ")->text(), "t\\ ");
  EXPECT_TRUE(matches("x y", "x y"));  // inner spaces are part of the name
  EXPECT_TRUE(matches("t\r", "t"));    // CRLF files
}

TEST(ignore_pattern, bang_negates_unless_escaped) {
  const auto negated = ignore_pattern::parse("!n");
  ASSERT_TRUE(negated);
  EXPECT_TRUE(negated->negated());
  EXPECT_TRUE(negated->matches("n", false));
  const auto literal = ignore_pattern::parse("\\!n");
  ASSERT_TRUE(literal);
  EXPECT_FALSE(literal->negated());
  EXPECT_TRUE(literal->matches("!n", false));
  EXPECT_FALSE(literal->matches("n", false));
}

TEST(ignore_pattern, trailing_slash_matches_directories_only) {
  EXPECT_TRUE(matches("build/", "build", true));
  EXPECT_TRUE(matches("build/", "src/build", true));
  EXPECT_FALSE(matches("build/", "build", false));
  EXPECT_TRUE(matches("build", "build", false));
}

TEST(ignore_pattern, a_slash_at_the_start_or_middle_anchors) {
  EXPECT_TRUE(matches("a", "x/y/a"));
  EXPECT_TRUE(matches("/a", "a"));
  EXPECT_FALSE(matches("/a", "x/a"));
  EXPECT_TRUE(matches("x/a", "x/a"));
  EXPECT_FALSE(matches("x/a", "y/x/a"));
  EXPECT_TRUE(matches("x/a/", "x/a", true));
  EXPECT_FALSE(matches("x/a/", "y/x/a", true));
}

TEST(ignore_pattern, wildcards_stop_at_slashes) {
  EXPECT_TRUE(matches("*.pyc", "a.pyc"));
  EXPECT_TRUE(matches("*.pyc", "pkg/sub/a.pyc"));
  EXPECT_TRUE(matches("x/*", "x/a"));
  EXPECT_FALSE(matches("x/*", "x/a/b"));
  EXPECT_TRUE(matches("x/a?c", "x/abc"));
  EXPECT_FALSE(matches("x/a?c", "x/a/c"));
  EXPECT_FALSE(matches("x[/]a", "x/a"));
  EXPECT_TRUE(matches("*/b", "a/b"));
  EXPECT_FALSE(matches("*/b", "x/a/b"));
  EXPECT_TRUE(matches("x/a***c", "x/abc"));  // stars that are not a whole component act as one '*'
  EXPECT_FALSE(matches("x/b***c", "x/b/c"));
}

TEST(ignore_pattern, classes_ranges_and_negated_classes) {
  EXPECT_TRUE(matches("[ab]", "a"));
  EXPECT_FALSE(matches("[ab]", "[ab]"));
  EXPECT_TRUE(matches("\\[ab]", "[ab]"));
  EXPECT_TRUE(matches("[!a]", "b"));
  EXPECT_FALSE(matches("[!a]", "a"));
  EXPECT_TRUE(matches("[^a]", "b"));
  EXPECT_FALSE(matches("[^a]", "a"));
  EXPECT_TRUE(matches("[a-c]x", "bx"));
  EXPECT_FALSE(matches("[a-c]x", "dx"));
  EXPECT_TRUE(matches("[]a]", "]"));  // a ']' first in the class is a member
  EXPECT_TRUE(matches("[a-]", "-"));
  EXPECT_TRUE(matches("[[:digit:]]x", "7x"));
  EXPECT_FALSE(matches("[[:digit:]]x", "ax"));
}

TEST(ignore_pattern, double_star_forms) {
  for (const char* path : {"x", "a/x", "a/b/x"}) EXPECT_TRUE(matches("**/x", path)) << path;
  EXPECT_FALSE(matches("**/x", "ax"));
  EXPECT_TRUE(matches("x/**", "x/a"));
  EXPECT_TRUE(matches("x/**", "x/a/b"));
  EXPECT_FALSE(matches("x/**", "x", true));
  for (const char* path : {"a/b", "a/x/b", "a/x/y/b"}) EXPECT_TRUE(matches("a/**/b", path)) << path;
  EXPECT_FALSE(matches("a/**/b", "a/xb"));
  EXPECT_FALSE(matches("a/**/b", "x/a/b"));
  EXPECT_TRUE(matches("**", "a/b/c"));
}

TEST(ignore_pattern, malformed_patterns_never_match_and_never_throw) {
  for (const char* line : {"[ab", "x/[ab", "[", "[!", "a\\", "x/a\\", "[[:bogus:]]", "[\\", "[a-\\"}) {
    const auto pattern = ignore_pattern::parse(line);
    ASSERT_TRUE(pattern) << line;
    for (const char* path : {"[ab", "a", "x/[ab", "[", "a\\", "x/a\\", "b"}) {
      EXPECT_FALSE(pattern->matches(path, false)) << line << " vs " << path;
    }
  }
}

TEST(ignore_pattern, matches_bytes_not_characters) {
  EXPECT_TRUE(matches("d\xff", "d\xff"));
  EXPECT_TRUE(matches("*\xff", "d\xff"));
  EXPECT_TRUE(matches("[\xe0-\xff]t*", "\xe9t\xe9"));
  EXPECT_FALSE(wildmatch("?", "\xc3\xa9", true));  // a two-byte UTF-8 character is two bytes to git
  EXPECT_TRUE(wildmatch("??", "\xc3\xa9", true));
}

TEST(ignore_pattern, files_are_numbered_like_git_numbers_them) {
  const auto patterns = parse_ignore_file("\xEF\xBB\xBF# comment\r\n\r\nbuild/\r\n!keep\nlast");
  ASSERT_EQ(patterns.size(), 3u);
  EXPECT_EQ(patterns[0].line, 3u);
  EXPECT_EQ(patterns[0].pattern.text(), "build/");
  EXPECT_EQ(patterns[1].line, 4u);
  EXPECT_TRUE(patterns[1].pattern.negated());
  EXPECT_EQ(patterns[2].line, 5u);
  EXPECT_TRUE(parse_ignore_file("").empty());
}

// ---- the stack of ignore files --------------------------------------------------------------------------

TEST(ignore_rules, the_last_matching_line_of_a_file_wins) {
  ignore_rules rules({.defaults = false});
  rules.push_directory("", "*.log\n!keep.log\n", "");
  EXPECT_TRUE(rules.ignored("a.log", false));
  EXPECT_FALSE(rules.ignored("keep.log", false));
  const auto why = rules.explain("keep.log", false);
  ASSERT_TRUE(why);
  EXPECT_TRUE(why->negated);
  EXPECT_EQ(why->describe(), ".gitignore:2: !keep.log");
  EXPECT_FALSE(rules.explain("other", false));
}

TEST(ignore_rules, a_deeper_file_overrides_its_parents_and_ferryignore_overrides_gitignore) {
  ignore_rules rules({.defaults = false});
  rules.push_directory("", "*.csv\n", "");
  rules.push_directory("data", "!*.csv\n", "big.csv\n");
  EXPECT_FALSE(rules.ignored("data/small.csv", false));
  EXPECT_TRUE(rules.ignored("data/big.csv", false));
  EXPECT_EQ(rules.explain("data/big.csv", false)->describe(), "data/.ferryignore:1: big.csv");
  EXPECT_EQ(rules.explain("data/small.csv", false)->describe(), "data/.gitignore:1: !*.csv");
  rules.pop_directory();
  EXPECT_TRUE(rules.ignored("top.csv", false));
  rules.push_directory("other", "", "");
  EXPECT_TRUE(rules.ignored("other/x.csv", false));  // the popped directory's rules are gone
}

TEST(ignore_rules, patterns_anchor_to_the_directory_of_their_file) {
  ignore_rules rules({.defaults = false});
  rules.push_directory("", "", "");
  rules.push_directory("a", "/x\nb/c\n", "");
  EXPECT_TRUE(rules.ignored("a/x", false));
  EXPECT_FALSE(rules.ignored("a/c", false));
  rules.push_directory("a/b", "", "");
  EXPECT_TRUE(rules.ignored("a/b/c", false));
  rules.push_directory("a/b/x", "", "");
  EXPECT_FALSE(rules.ignored("a/b/x/x", false));
}

TEST(ignore_rules, nothing_under_an_excluded_directory_is_re_included) {
  ignore_rules rules({.defaults = false});
  rules.push_directory("", "build/\n!build/keep\n", "");
  EXPECT_TRUE(rules.ignored("build", true));
  rules.push_directory("build", "!*\n", "!*\n");
  EXPECT_TRUE(rules.ignored("build/keep", false));
  EXPECT_EQ(rules.explain("build/keep", false)->describe(), ".gitignore:1: build/");
  rules.push_directory("build/sub", "", "");
  EXPECT_EQ(rules.explain("build/sub/x", false)->describe(), ".gitignore:1: build/");
}

TEST(ignore_rules, but_contents_of_a_directory_can_be_re_included) {
  ignore_rules rules({.defaults = false});
  rules.push_directory("", "build/*\n!build/keep\n", "");
  EXPECT_FALSE(rules.ignored("build", true));
  rules.push_directory("build", "", "");
  EXPECT_TRUE(rules.ignored("build/x", false));
  EXPECT_FALSE(rules.ignored("build/keep", false));
}

TEST(ignore_rules, defaults_exclude_what_is_never_worth_shipping) {
  ignore_rules rules;
  rules.push_directory("", "", "");
  EXPECT_TRUE(rules.ignored(".git", true));
  EXPECT_TRUE(rules.ignored(".git", false));  // a worktree's .git file
  EXPECT_TRUE(rules.ignored("__pycache__", true));
  EXPECT_TRUE(rules.ignored("a.pyc", false));
  EXPECT_TRUE(rules.ignored(".ipynb_checkpoints", true));
  EXPECT_TRUE(rules.ignored(".venv", true));
  EXPECT_FALSE(rules.ignored(".venv", false));
  EXPECT_FALSE(rules.ignored("a.py", false));
  EXPECT_EQ(rules.explain("__pycache__", true)->describe(), "default: __pycache__/");
  rules.push_directory("pkg", "", "");
  EXPECT_TRUE(rules.ignored("pkg/__pycache__", true));
  EXPECT_TRUE(rules.ignored("pkg/m.pyc", false));

  ignore_rules none({.defaults = false});
  none.push_directory("", "", "");
  EXPECT_FALSE(none.ignored("a.pyc", false));
}

TEST(ignore_rules, config_excludes_sit_above_defaults_and_below_every_file) {
  ignore_rules rules({.excludes = {"*.csv", "!.venv/", "data/"}});
  rules.push_directory("", "!keep.csv\n", "");
  EXPECT_TRUE(rules.ignored("a.csv", false));
  EXPECT_EQ(rules.explain("a.csv", false)->describe(), "config packaging.excludes[1]: *.csv");
  EXPECT_FALSE(rules.ignored("keep.csv", false));
  EXPECT_FALSE(rules.ignored(".venv", true));  // config can re-include what a default leaves out
  EXPECT_TRUE(rules.ignored("data", true));
  rules.push_directory("sub", "", "!*.pyc\n");
  EXPECT_TRUE(rules.ignored("sub/b.csv", false));
  EXPECT_FALSE(rules.ignored("sub/m.pyc", false));  // and any ignore file can re-include a default
  EXPECT_TRUE(rules.ignored("sub/__pycache__", true));
}

TEST(ignore_rules, entering_directories_out_of_order_is_a_bug) {
  ignore_rules rules;
  EXPECT_THROW(rules.push_directory("a", "", ""), std::logic_error);
  EXPECT_THROW((void)rules.ignored("a", false), std::logic_error);
  rules.push_directory("", "", "");
  EXPECT_THROW(rules.push_directory("a/b", "", ""), std::logic_error);
  EXPECT_THROW((void)rules.ignored("a/b", false), std::logic_error);
  rules.pop_directory();
  EXPECT_THROW(rules.pop_directory(), std::logic_error);
}

TEST(packaging_errors, have_their_own_category) {
  const boost::system::error_code ec = errc::unreadable_file;
  EXPECT_STREQ(ec.category().name(), "ferry.packaging");
  EXPECT_EQ(ec.message(), "file cannot be read");
  EXPECT_NE(ec, make_error_code(errc::bad_pattern));
}

// ---- the oracle: real git on random trees ---------------------------------------------------------------

std::string printable(std::string_view bytes) {
  std::string out;
  for (const unsigned char c : bytes) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::string join(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : fmt::format("{}/{}", dir, name);
}

bool has_git_component(std::string_view path) {
  return path == ".git" || path.starts_with(".git/") || path.find("/.git/") != std::string_view::npos ||
         path.ends_with("/.git");
}

// Where git finds the global excludes file of a tree.
enum class global_place {
  none,
  xdg_default,     // $XDG_CONFIG_HOME/git/ignore, or ~/.config/git/ignore without XDG_CONFIG_HOME
  home_gitconfig,  // core.excludesFile = ~/excludes in ~/.gitconfig
  xdg_gitconfig,   // core.excludesFile = "<absolute>" in $XDG_CONFIG_HOME/git/config (or ~/.config/git/config)
  repo_config,     // core.excludesFile in the repository's own config, overriding ~/.gitconfig
};

constexpr std::string_view ignore_list_name = "ignore-list";  // what a symlinked .gitignore points at

struct random_tree {
  std::set<std::string> files;  // besides the .gitignore files
  std::set<std::string> dirs;   // besides the root
  std::map<std::string, std::string> gitignores;  // by directory, "" for the root
  std::set<std::string> symlinked;  // directories whose .gitignore is a symlink to ignore_list_name beside it
  std::string info_exclude;         // .git/info/exclude
  std::string global_excludes;      // the global excludes file, when `where` is not none
  global_place where = global_place::none;
  bool xdg = false;        // XDG_CONFIG_HOME is set (for git and ferry alike)
  std::string workspace;   // "" for the top level, else the directory of the tree that ferry packs
  bool defaults = false;   // ferry's defaults on: git sees them at the top of the global excludes file

  std::string describe() const {
    std::string out = "tree:\n";
    for (const auto& d : dirs) out += fmt::format("  {}/\n", printable(d));
    for (const auto& f : files) out += fmt::format("  {}\n", printable(f));
    auto lines = [&](std::string_view title, std::string_view text) {
      out += fmt::format("  {}:\n", printable(title));
      std::size_t line = 1;
      for (std::size_t start = 0; start < text.size(); ++line) {
        const auto end = std::min(text.find('\n', start), text.size());
        out += fmt::format("    {:2}| {}\n", line, printable(text.substr(start, end - start)));
        start = end + 1;
      }
    };
    for (const auto& [dir, text] : gitignores) {
      lines(join(dir, symlinked.count(dir) ? ".gitignore -> ignore-list" : ".gitignore"), text);
    }
    if (!info_exclude.empty()) lines(".git/info/exclude", info_exclude);
    if (where != global_place::none) lines(fmt::format("global excludes ({})", static_cast<int>(where)), global_excludes);
    out += fmt::format("  xdg: {}, defaults: {}, workspace: '{}'\n", xdg, defaults, printable(workspace));
    return out;
  }

  // Paths below `dir`, relative to it.
  std::vector<std::string> below(const std::string& dir) const {
    std::vector<std::string> out;
    const std::string prefix = dir.empty() ? "" : dir + "/";
    for (const auto* set : {&files, &dirs}) {
      for (const auto& p : *set) {
        if (p.compare(0, prefix.size(), prefix) == 0) out.push_back(p.substr(prefix.size()));
      }
    }
    return out;
  }
};

// Names that exercise the syntax: globs, comment and negation characters, spaces, backslashes, non-UTF-8,
// and the directories that are special to git (.git, below the top) and to ferry (.venv).
const std::vector<std::string> names = {"a",   "b",    "ab",         "abc",      "a.pyc", "b.py", "build",
                                        "x y", "t ",   "[ab]",       "#h",       "!n",    "s*",   "q?",
                                        "e\\f", ".hid", "\xe9t\xe9", "d\xff", "c.txt", "ba", ".git", ".venv"};

const std::vector<std::string> globs = {
    "*",      "?",         "a*",      "*b",         "*.pyc",       "*.py?",     "[ab]",      "[!a]*",
    "[^b]",   "[a-c]*",    "[]a]*",   "?b*",        "[[:alpha:]]*", "x*y",      "***",       "a**",
    "[ab",    "\\[ab]",    "*\xff",   "d?",         "\xe9*",       "[\xe0-\xff]*", "x[[:space:]]y", "[[:bogus:]]",
    "\\#h",   "#h",        "t\\ ",    "e\\\\f",     "s\\*",        "q\\?",      "[\\]]*",    "b*[!y]"};

const std::vector<std::string> whitelists = {"*\n!*/\n!*.py\n", "/*\n!/build/\n", "*\n!*/\n", "**\n!**/\n!*.txt\n"};

class tree_generator {
 public:
  explicit tree_generator(unsigned seed) : rng_(seed) {}

  random_tree generate() {
    random_tree tree;
    const std::size_t paths = 20 + pick(61);
    for (std::size_t i = 0; i < paths; ++i) add_path(tree);
    std::vector<std::string> dirs{""};
    for (const auto& dir : tree.dirs) {
      if (!has_git_component(dir)) dirs.push_back(dir);
    }
    for (const auto& dir : dirs) {
      if (!chance(dir.empty() ? 85 : 45)) continue;
      tree.gitignores[dir] = (chance(dir.empty() ? 20 : 5) ? one_of(whitelists) : "") + ignore_file(tree, dir);
      if (chance(20)) {
        tree.symlinked.insert(dir);
        tree.files.insert(join(dir, ignore_list_name));
      }
    }
    if (chance(50)) tree.info_exclude = ignore_file(tree, "");
    tree.defaults = chance(40);
    tree.where = static_cast<global_place>(pick(5));
    if (tree.defaults && tree.where == global_place::none) tree.where = global_place::xdg_default;
    if (tree.where != global_place::none) tree.global_excludes = ignore_file(tree, "");
    tree.xdg = chance(50);
    if (chance(25) && dirs.size() > 1) tree.workspace = dirs[1 + pick(dirs.size() - 1)];
    // git run in a directory holding a .git that is not a repository stops there ("invalid gitfile").
    const auto own_git = join(tree.workspace, ".git");
    if (!tree.workspace.empty() && (tree.files.count(own_git) || tree.dirs.count(own_git))) tree.workspace.clear();
    return tree;
  }

 private:
  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  bool chance(std::size_t percent) { return pick(100) < percent; }
  const std::string& one_of(const std::vector<std::string>& v) { return v[pick(v.size())]; }

  void add_path(random_tree& tree) {
    const std::size_t depth = 1 + pick(4);
    std::string path;
    for (std::size_t level = 0; level < depth; ++level) {
      const auto name = one_of(names);
      if (level == 0 && name == ".git") return;  // the repository's own
      const auto next = join(path, name);
      if (level + 1 < depth) {
        if (tree.files.count(next)) return;
      } else if (tree.dirs.count(next)) {
        return;
      }
      path = next;
    }
    tree.files.insert(path);
    for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      tree.dirs.insert(path.substr(0, slash));
    }
  }

  std::string ignore_file(const random_tree& tree, const std::string& dir) {
    const std::string eol = chance(10) ? "\r\n" : "\n";
    std::string out;
    const std::size_t lines = 1 + pick(dir.empty() ? 8 : 5);
    for (std::size_t i = 0; i < lines; ++i) out += line(tree, dir) + eol;
    if (chance(15)) out.resize(out.size() - eol.size());  // no newline at the end
    return out;
  }

  std::string line(const random_tree& tree, const std::string& dir) {
    const auto roll = pick(100);
    if (roll < 6) return one_of({"# comment", "#h", "#!n", "#"});
    if (roll < 10) return one_of({"", "   ", "\t"});
    std::string body = pattern_body(tree, dir);
    if (chance(20)) body += '/';
    if ((body.front() == '#' || body.front() == '!') && chance(70)) body = "\\" + body;
    if (chance(25)) body = "!" + body;
    if (chance(15)) body += one_of({" ", "  ", "\\ ", " \\ ", "\\"});
    return body;
  }

  std::string pattern_body(const random_tree& tree, const std::string& dir) {
    const auto below = tree.below(dir);
    auto existing = [&] { return below.empty() ? one_of(names) : below[pick(below.size())]; };
    switch (pick(9)) {
      case 0: return component(one_of(names), true);
      case 1: return "/" + path_pattern(existing());
      case 2: {
        auto p = path_pattern(existing());
        return p.find('/') == std::string::npos ? component(one_of(names), false) + "/" + p : p;
      }
      case 3: return "**/" + (chance(50) ? component(one_of(names), true) : path_pattern(existing()));
      case 4: return path_pattern(existing()) + "/**";
      case 5: return path_pattern(existing()) + "/**/" + component(one_of(names), true);
      case 6:
        return one_of({"*", "**", "***", "?", "*/", "**/", "/*", "/**", "*/*", "a/*", "*/b", "**/**", "a/**/**/b"});
      case 7: return one_of(globs) + (chance(40) ? "/" + one_of(globs) : "");
      default: return component(one_of(names), true);
    }
  }

  // A relative path turned into a pattern, each component kept literal or made a glob.
  std::string path_pattern(const std::string& path) {
    std::string out;
    std::size_t start = 0;
    for (;;) {
      const auto slash = path.find('/', start);
      const bool last = slash == std::string::npos;
      if (!out.empty()) out += '/';
      out += component(path.substr(start, last ? std::string::npos : slash - start), last);
      if (last || chance(15)) break;  // sometimes only a leading part of the path
      start = slash + 1;
    }
    return out;
  }

  std::string component(const std::string& name, bool last) {
    const auto how = pick(100);
    if (how < 20) return one_of(globs);
    if (how < 45) return glob_like(name);
    std::string out;
    for (const char c : name) {
      if ((c == '[' || c == '*' || c == '?' || c == '\\') && chance(75)) out += '\\';
      out += c;
    }
    if (last && out.back() == ' ' && chance(60)) out.insert(out.size() - 1, "\\");
    return out;
  }

  std::string glob_like(const std::string& name) {
    const std::string rest = name.substr(1);
    switch (pick(8)) {
      case 0: return name.substr(0, 1) + "*";
      case 1: return "*" + name.substr(name.size() - 1);
      case 2: {
        std::string out = name;
        out[pick(out.size())] = '?';
        return out;
      }
      case 3: return "[" + name.substr(0, 1) + "z]" + rest;
      case 4: return std::string(chance(50) ? "[!" : "[^") + "z]" + rest;
      case 5: {
        const unsigned char c = static_cast<unsigned char>(name[0]);
        const char lo = static_cast<char>(c > 1 ? c - 1 : c);
        return fmt::format("[{}-{}]{}", lo, static_cast<char>(c < 0xff ? c + 1 : c), rest);
      }
      case 6: return name + "**";
      default: return "**" + name;
    }
  }

  std::mt19937 rng_;
};

// Sets (or, with nullopt, removes) environment variables until destroyed. ferry reads HOME and
// XDG_CONFIG_HOME from its own environment as git does, and git inherits this one, so both see the same.
class scoped_env {
 public:
  void set(const std::string& name, std::optional<std::string> value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    apply(name, value);
  }
  ~scoped_env() {
    for (const auto& [name, value] : saved_) apply(name, value);
  }

 private:
  static void apply(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// A home directory for git and ferry that is not the user's: no system config, nothing from the caller.
void isolate_git(scoped_env& env, const fs::path& home, bool xdg) {
  env.set("HOME", home.string());
  env.set("XDG_CONFIG_HOME", xdg ? std::optional<std::string>((home / "xdg").string()) : std::nullopt);
  env.set("GIT_CONFIG_NOSYSTEM", "1");
  for (const char* name : {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                           "GIT_COMMON_DIR", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_CEILING_DIRECTORIES"}) {
    env.set(name, std::nullopt);
  }
}

std::vector<std::string> split_nul(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start < text.size();) {
    const auto end = std::min(text.find('\0', start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// `config`: "name=value" settings for this git only (ferry reads none of them).
test::process_result run_git(const fs::path& cwd, std::vector<std::string> args, const std::string& input = {},
                             const std::vector<std::string>& config = {}) {
  for (const auto& setting : config) args.insert(args.begin(), {"-c", setting});
  args.insert(args.begin(), {"git", "-c", "core.quotepath=off", "-c", "init.defaultBranch=main", "-c",
                             "user.name=t", "-c", "user.email=t@example.com"});
  test::process_options options;
  options.cwd = cwd;
  options.input = input;
  return test::run(args, options);
}

// What git lists in `cwd`: untracked files that are not ignored, relative to cwd, sorted.
std::vector<std::string> git_included(const fs::path& cwd, const std::vector<std::string>& config = {}) {
  const auto r = run_git(cwd, {"ls-files", "--cached", "--others", "--exclude-standard", "-z"}, {}, config);
  if (r.exit_code != 0) throw std::runtime_error("git ls-files failed: " + r.err);
  auto files = split_nul(r.out);
  std::sort(files.begin(), files.end());
  return files;
}

// The files ferry packs from `root`: the real tree walker.
std::vector<std::string> packed_files(const fs::path& root, bool defaults) {
  walk_options options;
  options.ignore.defaults = defaults;
  diagnostics diag;
  auto walked = walk_tree(root, options, diag);
  if (!walked) throw std::runtime_error(diag.message);
  std::vector<std::string> out;
  for (const auto& f : walked->files) out.push_back(f.path);
  return out;
}

struct verdict {
  std::string source;
  std::string line;
  std::string pattern;
  bool operator==(const verdict&) const = default;
};

// One repository reused for every tree, with its own home: only untracked files are compared, so the index
// stays empty.
class git_oracle {
 public:
  git_oracle() {
    isolate_git(env_, home_.path(), false);
    const auto init = run_git(repo_.path(), {"init", "-q"});
    if (init.exit_code != 0) throw std::runtime_error("git init failed: " + init.err);
    repo_config_ = test::read_file(repo_.path() / ".git" / "config");
  }

  const fs::path& root() const { return repo_.path(); }
  fs::path workspace(const random_tree& tree) const { return tree.workspace.empty() ? root() : root() / tree.workspace; }
  // The global excludes file as git names it in `check-ignore -v`.
  const std::string& global_file() const { return global_file_; }
  // With ferry's defaults on, git reads them and then the global file from this file instead (named with
  // `git -c`, which ferry never sees): its first lines are the defaults.
  const std::string& defaults_file() const { return defaults_file_; }
  const std::vector<std::string>& config() const { return config_; }
  std::vector<std::string> included(const fs::path& cwd) const { return git_included(cwd, config_); }

  void write(const random_tree& tree) {
    for (const auto& entry : fs::directory_iterator(repo_.path())) {
      if (entry.path().filename() != ".git") fs::remove_all(entry.path());
    }
    for (const auto& entry : fs::directory_iterator(home_.path())) fs::remove_all(entry.path());
    for (const auto& f : tree.files) repo_.write(f, "x");
    for (const auto& [dir, text] : tree.gitignores) {
      if (!tree.symlinked.count(dir)) {
        repo_.write(join(dir, ".gitignore"), text);
        continue;
      }
      repo_.write(join(dir, ignore_list_name), text);
      fs::create_symlink(std::string(ignore_list_name), repo_.path() / join(dir, ".gitignore"));
    }
    repo_.write(".git/info/exclude", tree.info_exclude);
    isolate_git(env_, home_.path(), tree.xdg);
    write_global(tree);
  }

  std::map<std::string, verdict> explain(const fs::path& cwd, const std::vector<std::string>& paths) {
    std::string input;
    for (const auto& p : paths) input += p + '\0';
    const auto r = run_git(cwd, {"check-ignore", "-v", "-n", "-z", "--no-index", "--stdin"}, input, config_);
    if (r.exit_code != 0 && r.exit_code != 1) throw std::runtime_error("git check-ignore failed: " + r.err);
    const auto fields = split_nul(r.out);
    std::map<std::string, verdict> out;
    for (std::size_t i = 0; i + 3 < fields.size(); i += 4) {
      out[fields[i + 3]] = verdict{fields[i], fields[i + 1], fields[i + 2]};
    }
    return out;
  }

 private:
  void write_global(const random_tree& tree) {
    const fs::path config_home = tree.xdg ? home_.path() / "xdg" : home_.path() / ".config";
    std::string repo_config = repo_config_;
    switch (tree.where) {
      case global_place::none: global_file_.clear(); break;
      case global_place::xdg_default: global_file_ = (config_home / "git" / "ignore").string(); break;
      case global_place::home_gitconfig:
        global_file_ = (home_.path() / "excludes").string();
        home_.write(".gitconfig", "[user]\n\tname = t\n[core]\n\texcludesFile = ~/excludes\n");
        break;
      case global_place::xdg_gitconfig:
        global_file_ = (home_.path() / "elsewhere" / "x y").string();
        home_.write(".gitconfig", "[core]\n  autocrlf = false\n");  // read after the XDG file: no excludesFile here
        home_.write(fs::relative(config_home / "git" / "config", home_.path()).string(),
                    fmt::format("# global\n[Core]\n  ExcludesFile = \"{}\" ; a comment\n", global_file_));
        break;
      case global_place::repo_config:
        global_file_ = (home_.path() / "from-repo").string();
        home_.write(".gitconfig", "[core]\n  excludesfile = ~/not-this-one\n");
        repo_config += fmt::format("[core \"x\"]\n\texcludesFile = /nowhere\n[core]\texcludesFile={}\n", global_file_);
        break;
    }
    repo_.write(".git/config", repo_config);
    if (!global_file_.empty()) home_.write(fs::relative(global_file_, home_.path()).string(), tree.global_excludes);
    config_.clear();
    defaults_file_.clear();
    if (tree.defaults) {
      // ferry's defaults sit below every ignore file git reads: the top of the global file is the same place.
      std::string defaults;
      for (const auto d : default_excludes()) defaults += fmt::format("{}\n", d);
      defaults_file_ = home_.write("defaults-then-global", defaults + tree.global_excludes).string();
      config_.push_back("core.excludesFile=" + defaults_file_);
    }
  }

  scoped_env env_;
  temp_dir home_;
  temp_dir repo_;
  std::string repo_config_;
  std::string global_file_;
  std::string defaults_file_;
  std::vector<std::string> config_;
};

std::string difference(const std::vector<std::string>& git, const std::vector<std::string>& ferry) {
  std::vector<std::string> only_git, only_ferry;
  std::set_difference(git.begin(), git.end(), ferry.begin(), ferry.end(), std::back_inserter(only_git));
  std::set_difference(ferry.begin(), ferry.end(), git.begin(), git.end(), std::back_inserter(only_ferry));
  std::string out;
  for (const auto& p : only_git) out += fmt::format("  included by git only:   {}\n", printable(p));
  for (const auto& p : only_ferry) out += fmt::format("  included by ferry only: {}\n", printable(p));
  return out;
}

std::size_t oracle_trees() {
  const char* override_count = std::getenv("FERRY_IGNORE_ORACLE_TREES");  // more, when hunting a bug
  return override_count ? std::strtoul(override_count, nullptr, 10) : 200;
}

// Every path below `dir` but git's own directories, relative to it; symlinks are not followed.
std::vector<std::string> paths_below(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), dir).native();
    if (it->path().filename() == ".git") {
      if (it->is_directory() && !it->is_symlink()) it.disable_recursion_pending();
      continue;
    }
    out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What `ferry pack --explain` should say for git's verdict on a path.
std::string expected_explanation(const verdict& git, const random_tree& tree, const git_oracle& oracle) {
  if (git.pattern.empty()) return "included (no rule matches)";
  const std::string how = git.pattern.starts_with('!') ? "included" : "excluded";
  std::string source = git.source;
  auto line = std::stoul(git.line);
  if (tree.defaults && source == oracle.defaults_file()) {
    if (line <= default_excludes().size()) return fmt::format("{} by default: {}", how, git.pattern);
    source = oracle.global_file();
    line -= default_excludes().size();
  }
  // git names the repository's files by their path from the top level; ferry by their full path.
  if (source.starts_with(".git/")) source = (oracle.root() / source).string();
  return fmt::format("{} by {}:{}: {}", how, source, line, git.pattern);
}

// A workspace below the top level whose own directories git leaves in: ferry always packs its workspace.
void keep_workspace_only_if_included(random_tree& tree, const git_oracle& git) {
  if (tree.workspace.empty()) return;
  std::vector<std::string> prefixes;
  for (auto slash = tree.workspace.find('/'); slash != std::string::npos; slash = tree.workspace.find('/', slash + 1)) {
    prefixes.push_back(tree.workspace.substr(0, slash));
  }
  prefixes.push_back(tree.workspace);
  std::string input;
  for (const auto& p : prefixes) input += p + '\0';
  const auto r = run_git(git.root(), {"check-ignore", "-z", "--no-index", "--stdin"}, input, git.config());
  if (r.exit_code == 0) tree.workspace.clear();
}

TEST(ignore_rules_oracle, agrees_with_git_on_random_trees) {
  git_oracle git;
  const std::size_t trees = oracle_trees();
  std::size_t compared_paths = 0, ignored_somewhere = 0, subdirectories = 0;
  for (unsigned seed = 1; seed <= trees; ++seed) {
    auto tree = tree_generator(seed).generate();
    git.write(tree);
    keep_workspace_only_if_included(tree, git);
    const auto workspace = git.workspace(tree);

    const auto ours = packed_files(workspace, tree.defaults);
    const auto theirs = git.included(workspace);
    ASSERT_EQ(ours, theirs) << "seed " << seed << "\n" << tree.describe() << difference(theirs, ours);
    if (!tree.workspace.empty()) {
      ++subdirectories;
      continue;  // check-ignore names files from the top level: the reasons are compared at the top
    }

    const auto paths = paths_below(workspace);
    const auto their_reasons = git.explain(workspace, paths);
    for (const auto& path : paths) {
      const auto it = their_reasons.find(path);
      ASSERT_NE(it, their_reasons.end()) << "git check-ignore skipped " << printable(path);
      walk_options options;
      options.ignore.defaults = tree.defaults;
      diagnostics diag;
      const auto ours_why = explain_path(workspace, path, options, diag);
      ASSERT_TRUE(ours_why) << diag.message;
      ASSERT_EQ(*ours_why, expected_explanation(it->second, tree, git))
          << "seed " << seed << ", path " << printable(path) << "\n" << tree.describe();
      if (!it->second.pattern.empty()) ++ignored_somewhere;
    }
    compared_paths += paths.size();
  }
  // Guards the generator: random patterns that match nothing would make agreement meaningless.
  EXPECT_GT(ignored_somewhere, compared_paths / 10);
  EXPECT_GT(subdirectories, trees / 10);
  std::cout << "compared " << trees << " trees (" << subdirectories << " packed from a subdirectory), "
            << compared_paths << " paths, " << ignored_somewhere << " decided by a pattern\n";
}

// ---- git's ignore sources, one at a time ----------------------------------------------------------------

// A repository with its own home directory, for hand-made trees.
class git_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    isolate_git(env_, home_.path(), false);
    ASSERT_EQ(run_git(repo_.path(), {"init", "-q"}).exit_code, 0);
  }

  void write(std::string_view path, std::string_view contents = "x") { repo_.write(path, contents); }
  void symlink(const std::string& target, std::string_view path) { fs::create_symlink(target, repo_ / path); }
  std::vector<std::string> git_files(std::string_view dir = "") { return git_included(repo_ / dir); }
  // With ferry's defaults on (.git out whatever the rules): these trees hold nothing else they exclude.
  std::vector<std::string> ferry_files(bool defaults = true, std::string_view dir = "") {
    return packed_files(repo_ / dir, defaults);
  }
  std::string explain(std::string_view path, bool defaults = true) {
    walk_options options;
    options.ignore.defaults = defaults;
    diagnostics diag;
    const auto why = explain_path(repo_.path(), path, options, diag);
    return why ? *why : "error: " + diag.message;
  }

  scoped_env env_;
  temp_dir home_;
  temp_dir repo_;
};

using strings = std::vector<std::string>;

TEST_F(git_fixture, info_exclude_and_the_global_excludes_file_are_read_with_gits_precedence) {
  write(".gitignore", "!b.log\n");
  write(".git/info/exclude", "*.log\n!c.tmp\n/sub/d.py\n");
  home_.write(".gitconfig", "[core]\n\texcludesFile = ~/global-ignore\n");
  home_.write("global-ignore", "*.tmp\nsub/\n!sub/\n");
  for (const char* f : {"a.log", "b.log", "c.tmp", "d.tmp", "e.py", "sub/d.py", "sub/e.py"}) write(f);
  const strings expected = {".gitignore", "b.log", "c.tmp", "e.py", "sub/e.py"};
  ASSERT_EQ(git_files(), expected);
  EXPECT_EQ(ferry_files(), expected);
  EXPECT_EQ(explain("a.log"), fmt::format("excluded by {}:1: *.log", (repo_ / ".git/info/exclude").string()));
  EXPECT_EQ(explain("d.tmp"), fmt::format("excluded by {}:1: *.tmp", (home_ / "global-ignore").string()));

  // Packed from a subdirectory, the repository's files still speak from the top level.
  ASSERT_EQ(git_files("sub"), strings{"e.py"});
  EXPECT_EQ(ferry_files(true, "sub"), strings{"e.py"});
}

TEST_F(git_fixture, without_core_excludes_file_the_xdg_ignore_file_is_read) {
  write("a.tmp");
  write("b.py");
  home_.write(".config/git/ignore", "*.tmp\n");
  ASSERT_EQ(git_files(), strings{"b.py"});
  EXPECT_EQ(ferry_files(), strings{"b.py"});

  env_.set("XDG_CONFIG_HOME", (home_ / "xdg").string());
  home_.write("xdg/git/ignore", "*.py\n");
  ASSERT_EQ(git_files(), strings{"a.tmp"});
  EXPECT_EQ(ferry_files(), strings{"a.tmp"});
}

TEST_F(git_fixture, a_parent_directorys_gitignore_applies_to_a_workspace_below_the_top) {
  write(".gitignore", "*.log\nws/build/\n");
  write("ws/a.log");
  write("ws/build/x.py");
  write("ws/m.py");
  ASSERT_EQ(git_files("ws"), strings{"m.py"});
  EXPECT_EQ(ferry_files(true, "ws"), strings{"m.py"});
}

TEST_F(git_fixture, a_linked_worktree_reads_the_main_repositorys_info_exclude) {
  ASSERT_EQ(run_git(repo_.path(), {"commit", "-q", "--allow-empty", "-m", "empty"}).exit_code, 0);
  const temp_dir elsewhere;
  const auto tree = elsewhere / "wt";
  ASSERT_EQ(run_git(repo_.path(), {"worktree", "add", "-q", tree.string()}).exit_code, 0);
  write(".git/info/exclude", "*.log\n");
  elsewhere.write("wt/a.log", "x");
  elsewhere.write("wt/b.py", "x");
  ASSERT_EQ(git_included(tree), strings{"b.py"});
  EXPECT_EQ(packed_files(tree, true), strings{"b.py"});
}

TEST_F(git_fixture, a_symlinked_gitignore_is_not_read) {
  write("patterns", "*.txt\n");
  symlink("patterns", ".gitignore");
  write("sub/patterns", "*.py\n");
  symlink("patterns", "sub/.gitignore");
  write("a.txt");
  write("sub/b.py");
  const strings expected = {".gitignore", "a.txt", "patterns", "sub/.gitignore", "sub/b.py", "sub/patterns"};
  ASSERT_EQ(git_files(), expected);
  EXPECT_EQ(ferry_files(), expected);
  EXPECT_EQ(explain("a.txt"), "included (no rule matches)");
}

TEST_F(git_fixture, a_symlinked_ferryignore_is_not_read_either) {
  write("patterns", "a.txt\n");
  symlink("patterns", ".ferryignore");
  write("a.txt");
  EXPECT_EQ(ferry_files(), (strings{".ferryignore", "a.txt", "patterns"}));
}

TEST_F(git_fixture, dot_git_never_ships_whatever_a_whitelist_says) {
  write(".gitignore", "*\n!*/\n!*.py\n!.git\n!.git/**\n");
  write(".git/hooks/hook.py");
  write("sub/.git", "gitdir: /nowhere\n");   // an invalid gitfile: git walks the directory, but not the file
  write("deep/er/.git/m.py");                // not a repository: git walks the directory, but not .git
  write("deep/er/n.py");
  write(".venv/lib/site.py");
  write("m.py");
  const strings expected = {".venv/lib/site.py", "deep/er/n.py", "m.py"};
  ASSERT_EQ(git_files(), expected);
  EXPECT_EQ(ferry_files(false), expected);
  // ferry's defaults are below every ignore file: "!*/" takes .venv back, as the same line would from git's
  // global excludes file; nothing takes .git back.
  EXPECT_EQ(ferry_files(true), expected);
  EXPECT_EQ(explain(".git/hooks/hook.py", false), "excluded by always: .git");
  EXPECT_EQ(explain("deep/er/.git", false), "excluded by always: .git");
}

// ---- where ferry and git part, on purpose or as git does ----------------------------------------------

// git's verdict on `path` (from the top level), as check-ignore -v names it: "source:line: pattern".
std::string git_rule(const fs::path& top, std::string_view path) {
  const auto r = run_git(top, {"check-ignore", "-v", "-z", "--stdin"}, std::string(path) + '\0');
  const auto fields = split_nul(r.out);
  if (r.exit_code != 0 || fields.size() < 3) return "git check-ignore matched nothing: " + r.err;
  return fmt::format("{}:{}: {}", fields[0], fields[1], fields[2]);
}

walk_result walked(const fs::path& root) {
  diagnostics diag;
  auto out = walk_tree(root, walk_options{}, diag);
  if (!out) throw std::runtime_error(diag.message);
  return std::move(*out);
}

std::string warnings_of(const walk_result& w) {
  std::string out;
  for (const auto& x : w.warnings) out += fmt::format("{}: {}\n", x.path, x.message);
  return out;
}

TEST_F(git_fixture, a_workspace_below_a_directory_git_ignores_ships_and_says_which_rule_git_applies) {
  write(".gitignore", "*.log\nbuild/\n");
  write("build/ws/m.py");
  write("build/ws/sub/n.py");
  write("build/ws/x.log");
  // git lists none of the workspace's files, and names the ancestor's rule for each of them.
  ASSERT_EQ(git_files("build/ws"), strings{});
  const auto rule = git_rule(repo_.path(), "build/ws/m.py");
  ASSERT_EQ(rule, ".gitignore:2: build/");
  // ferry ships the workspace all the same (the rules inside it still apply), warns once naming git's
  // rule (as ferry names an outer file: from the workspace), and --explain says that rule applies.
  const auto ws = repo_ / "build/ws";
  const auto w = walked(ws);
  strings files;
  for (const auto& f : w.files) files.push_back(f.path);
  EXPECT_EQ(files, (strings{"m.py", "sub/n.py"}));
  const auto from_ws = "../../" + rule;
  const auto all = warnings_of(w);
  EXPECT_EQ(std::count_if(w.warnings.begin(), w.warnings.end(),
                          [&](const walk_warning& x) { return x.message.find(from_ws) != std::string::npos; }),
            1)
      << all;
  walk_options options;
  diagnostics diag;
  const auto why = explain_path(ws, "sub/n.py", options, diag);
  ASSERT_TRUE(why) << diag.message;
  EXPECT_TRUE(why->starts_with("included (no rule matches); but git ignores ")) << *why;
  EXPECT_NE(why->find(from_ws), std::string::npos) << *why;
  const auto log = explain_path(ws, "x.log", options, diag);
  ASSERT_TRUE(log) << diag.message;
  EXPECT_TRUE(log->starts_with("excluded by ../../.gitignore:1: *.log; but git ignores ")) << *log;

  // A directory git re-includes is not an ignored ancestor.
  write(".gitignore", "build/*\n!build/ws/\n");
  ASSERT_EQ(git_files("build/ws"), (strings{"m.py", "sub/n.py", "x.log"}));
  EXPECT_EQ(warnings_of(walked(ws)), "");
}

TEST_F(git_fixture, a_nested_repository_is_one_entry_to_git_and_ships_nothing) {
  write("m.py");
  write("nested/x.py");
  write("nested/deeper/y.py");
  ASSERT_EQ(run_git(repo_ / "nested", {"init", "-q"}).exit_code, 0);
  const auto theirs = git_files();
  ASSERT_EQ(theirs, (strings{"m.py", "nested/"}));  // git does not descend: the repository is one entry
  strings files_git_lists;
  for (const auto& p : theirs) {
    if (!p.ends_with('/')) files_git_lists.push_back(p);
  }
  const auto w = walked(repo_.path());
  strings ours;
  for (const auto& f : w.files) ours.push_back(f.path);
  EXPECT_EQ(ours, files_git_lists);
  EXPECT_NE(warnings_of(w).find("nested: not packed: a git repository of its own"), std::string::npos)
      << warnings_of(w);
  const std::string why = "a git repository of its own, which git lists as one entry (a submodule registered in "
                          ".gitmodules ships)";
  EXPECT_EQ(explain("nested/x.py"), "not packed: nested/x.py is below nested, " + why);
  EXPECT_EQ(explain("nested"), "not packed: nested is " + why);
}

TEST_F(git_fixture, a_registered_submodule_ships_its_files_under_its_own_rules) {
  const temp_dir origin;
  origin.write(".gitignore", "*.tmp\n");
  origin.write("lib.py", "x");
  ASSERT_EQ(run_git(origin.path(), {"init", "-q"}).exit_code, 0);
  ASSERT_EQ(run_git(origin.path(), {"add", "."}).exit_code, 0);
  ASSERT_EQ(run_git(origin.path(), {"commit", "-q", "-m", "lib"}).exit_code, 0);
  const auto added = run_git(repo_.path(), {"submodule", "add", "-q", origin.path().string(), "sm"}, {},
                             {"protocol.file.allow=always"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  write(".gitignore", "*.dat\n");  // the outer repository's rules do not reach into the submodule
  write("sm/keep.dat");
  write("sm/scratch.tmp");
  write("sm/new.py");
  write("top.dat");
  // git lists the submodule as its gitlink; inside it, git lists its files under its own rules.
  ASSERT_EQ(git_files(), (strings{".gitignore", ".gitmodules", "sm"}));
  const auto inside = git_included(repo_ / "sm");
  ASSERT_EQ(inside, (strings{".gitignore", "keep.dat", "lib.py", "new.py"}));
  strings expected = {".gitignore", ".gitmodules"};
  for (const auto& p : inside) expected.push_back("sm/" + p);
  EXPECT_EQ(ferry_files(), expected);
  EXPECT_EQ(explain("sm/keep.dat"), "included (no rule matches) (in the submodule sm, under its own repository's rules)");
  EXPECT_EQ(explain("sm/scratch.tmp"),
            "excluded by .gitignore:1: *.tmp (in the submodule sm, under its own repository's rules)");
}

TEST_F(git_fixture, a_directory_only_rule_does_not_match_a_symlink_to_a_directory) {
  const temp_dir outside;
  outside.write("x.csv", "x");
  write(".gitignore", "data/\n");
  symlink(outside.path().string(), "data");
  // git lists the link: "data/" speaks of directories, and a symlink is not one to git.
  ASSERT_EQ(git_files(), (strings{".gitignore", "data"}));
  ASSERT_EQ(run_git(repo_.path(), {"check-ignore", "-q", "data"}).exit_code, 1);
  // ferry follows a link that leaves the workspace, and ships what it points at.
  EXPECT_EQ(ferry_files(), (strings{".gitignore", "data/x.csv"}));
  EXPECT_EQ(explain("data"), "included (no rule matches)");
  EXPECT_EQ(explain("data/x.csv"), "included (no rule matches)");
  // A rule without the slash matches the link, as in git.
  write(".gitignore", "data\n");
  ASSERT_EQ(git_files(), strings{".gitignore"});
  EXPECT_EQ(ferry_files(), strings{".gitignore"});
}

// ---- --explain agrees with the walker ------------------------------------------------------------------

TEST_F(git_fixture, explain_does_not_follow_a_symlink_to_a_directory) {
  write(".gitignore", "link/\n");
  write("data/x.py");
  symlink("data", "link");
  const strings expected = {".gitignore", "data/x.py", "link"};
  ASSERT_EQ(git_files(), expected);
  EXPECT_EQ(ferry_files(), expected);
  EXPECT_EQ(explain("link"), "included (no rule matches)");
  EXPECT_EQ(explain("link/"), "included (no rule matches)");
  EXPECT_EQ(explain("data"), "included (no rule matches)");
}

TEST_F(git_fixture, explain_below_a_kept_symlink_names_the_symlink) {
  write("data/.gitignore", "x.py\n");
  write("data/x.py");
  symlink("data", "link");
  EXPECT_EQ(explain("data/x.py"), "excluded by data/.gitignore:1: x.py");
  EXPECT_EQ(explain("link/x.py"), "not packed: link is a symlink and is packed as one (included (no rule matches))");
}

}  // namespace
}  // namespace ferry::packaging
