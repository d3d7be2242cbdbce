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

struct random_tree {
  std::set<std::string> files;  // besides the .gitignore files
  std::set<std::string> dirs;   // besides the root
  std::map<std::string, std::string> gitignores;  // by directory, "" for the root

  std::string describe() const {
    std::string out = "tree:\n";
    for (const auto& d : dirs) out += fmt::format("  {}/\n", printable(d));
    for (const auto& f : files) out += fmt::format("  {}\n", printable(f));
    for (const auto& [dir, text] : gitignores) {
      out += fmt::format("  {}:\n", printable(join(dir, ".gitignore")));
      std::size_t line = 1;
      for (std::size_t start = 0; start < text.size(); ++line) {
        const auto end = std::min(text.find('\n', start), text.size());
        out += fmt::format("    {:2}| {}\n", line, printable(text.substr(start, end - start)));
        start = end + 1;
      }
    }
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

// Names that exercise the syntax: globs, comment and negation characters, spaces, backslashes, non-UTF-8.
const std::vector<std::string> names = {"a",   "b",    "ab",         "abc",      "a.pyc", "b.py", "build",
                                        "x y", "t ",   "[ab]",       "#h",       "!n",    "s*",   "q?",
                                        "e\\f", ".hid", "\xe9t\xe9", "d\xff", "c.txt", "ba"};

const std::vector<std::string> globs = {
    "*",      "?",         "a*",      "*b",         "*.pyc",       "*.py?",     "[ab]",      "[!a]*",
    "[^b]",   "[a-c]*",    "[]a]*",   "?b*",        "[[:alpha:]]*", "x*y",      "***",       "a**",
    "[ab",    "\\[ab]",    "*\xff",   "d?",         "\xe9*",       "[\xe0-\xff]*", "x[[:space:]]y", "[[:bogus:]]",
    "\\#h",   "#h",        "t\\ ",    "e\\\\f",     "s\\*",        "q\\?",      "[\\]]*",    "b*[!y]"};

class tree_generator {
 public:
  explicit tree_generator(unsigned seed) : rng_(seed) {}

  random_tree generate() {
    random_tree tree;
    const std::size_t paths = 20 + pick(61);
    for (std::size_t i = 0; i < paths; ++i) add_path(tree);
    std::vector<std::string> dirs{""};
    dirs.insert(dirs.end(), tree.dirs.begin(), tree.dirs.end());
    for (const auto& dir : dirs) {
      if (!chance(dir.empty() ? 85 : 45)) continue;
      tree.gitignores[dir] = ignore_file(tree, dir);
    }
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
    const auto kind = pick(100);
    if (kind < 6) return one_of({"# comment", "#h", "#!n", "#"});
    if (kind < 10) return one_of({"", "   ", "\t"});
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

// What the tree walker will do on entering a directory: read its ignore files, if they are regular files.
void enter(ignore_rules& rules, const std::string& dir, const fs::path& here) {
  auto read_if_file = [](const fs::path& p) { return fs::is_regular_file(p) ? test::read_file(p) : std::string(); };
  rules.push_directory(dir, read_if_file(here / ".gitignore"), read_if_file(here / ".ferryignore"));
}

// The files ferry packs: the real tree walker, which git's own directory is not part of.
std::vector<std::string> packed_files(const fs::path& root) {
  walk_options options;
  options.ignore.defaults = false;
  diagnostics diag;
  auto walked = walk_tree(root, options, diag);
  if (!walked) throw std::runtime_error(diag.message);
  std::vector<std::string> out;
  for (const auto& f : walked->files) {
    if (!f.path.starts_with(".git/")) out.push_back(f.path);
  }
  return out;
}

struct verdict {
  std::string source;
  std::string line;
  std::string pattern;
  bool operator==(const verdict&) const = default;
};

// explain() for every path in the tree, entering excluded directories too.
void explain_all(const fs::path& root, ignore_rules& rules, const std::string& dir,
                 std::map<std::string, verdict>& out) {
  const auto here = dir.empty() ? root : root / dir;
  enter(rules, dir, here);
  for (const auto& entry : fs::directory_iterator(here)) {
    const std::string name = entry.path().filename().native();
    if (name == ".git") continue;
    const auto path = join(dir, name);
    const bool is_dir = entry.is_directory() && !entry.is_symlink();
    const auto why = rules.explain(path, is_dir);
    out[path] = why ? verdict{why->file, std::to_string(why->line), why->pattern} : verdict{};
    if (is_dir) explain_all(root, rules, path, out);
  }
  rules.pop_directory();
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

// One repository reused for every tree: only untracked files are compared, so the index stays empty.
class git_oracle {
 public:
  git_oracle() {
    options_.cwd = repo_.path();
    options_.env = {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", home_.path().string()}};
    options_.unset_env = {"XDG_CONFIG_HOME", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_GLOBAL"};
    const auto init = git({"init", "-q"});
    if (init.exit_code != 0) throw std::runtime_error("git init failed: " + init.err);
  }

  const fs::path& root() const { return repo_.path(); }

  void write(const random_tree& tree) {
    for (const auto& entry : fs::directory_iterator(repo_.path())) {
      if (entry.path().filename() != ".git") fs::remove_all(entry.path());
    }
    for (const auto& f : tree.files) repo_.write(f, "x");
    for (const auto& [dir, text] : tree.gitignores) repo_.write(join(dir, ".gitignore"), text);
  }

  std::vector<std::string> included() {
    const auto r = git({"ls-files", "--cached", "--others", "--exclude-standard", "-z"});
    if (r.exit_code != 0) throw std::runtime_error("git ls-files failed: " + r.err);
    auto files = split_nul(r.out);
    std::sort(files.begin(), files.end());
    return files;
  }

  std::map<std::string, verdict> explain(const std::vector<std::string>& paths) {
    std::string input;
    for (const auto& p : paths) input += p + '\0';
    const auto r = git({"check-ignore", "-v", "-n", "-z", "--no-index", "--stdin"}, input);
    if (r.exit_code != 0 && r.exit_code != 1) throw std::runtime_error("git check-ignore failed: " + r.err);
    const auto fields = split_nul(r.out);
    std::map<std::string, verdict> out;
    for (std::size_t i = 0; i + 3 < fields.size(); i += 4) {
      out[fields[i + 3]] = verdict{fields[i], fields[i + 1], fields[i + 2]};
    }
    return out;
  }

 private:
  test::process_result git(std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), {"git", "-c", "core.quotepath=off", "-c", "init.defaultBranch=main"});
    auto options = options_;
    options.input = input;
    return test::run(args, options);
  }

  temp_dir home_;
  temp_dir repo_;
  test::process_options options_;
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

TEST(ignore_rules_oracle, agrees_with_git_on_random_trees) {
  git_oracle git;
  const std::size_t trees = oracle_trees();
  std::size_t compared_paths = 0, ignored_somewhere = 0;
  for (unsigned seed = 1; seed <= trees; ++seed) {
    const auto tree = tree_generator(seed).generate();
    git.write(tree);

    ignore_rules rules({.defaults = false});
    const auto ours = packed_files(git.root());
    const auto theirs = git.included();
    ASSERT_EQ(ours, theirs) << "seed " << seed << "\n" << tree.describe() << difference(theirs, ours);

    std::map<std::string, verdict> our_reasons;
    explain_all(git.root(), rules, "", our_reasons);
    std::vector<std::string> paths;
    for (const auto& [path, why] : our_reasons) paths.push_back(path);
    const auto their_reasons = git.explain(paths);
    for (const auto& path : paths) {
      const auto& ours_why = our_reasons.at(path);
      const auto it = their_reasons.find(path);
      ASSERT_NE(it, their_reasons.end()) << "git check-ignore skipped " << printable(path);
      ASSERT_EQ(ours_why, it->second) << "seed " << seed << ", path " << printable(path) << "\n  ferry: "
                                      << printable(ours_why.source) << ":" << ours_why.line << ": "
                                      << printable(ours_why.pattern) << "\n  git:   " << printable(it->second.source)
                                      << ":" << it->second.line << ": " << printable(it->second.pattern) << "\n"
                                      << tree.describe();
      if (!ours_why.pattern.empty()) ++ignored_somewhere;
    }
    compared_paths += paths.size();
  }
  // Guards the generator: random patterns that match nothing would make agreement meaningless.
  EXPECT_GT(ignored_somewhere, compared_paths / 10);
  std::cout << "compared " << trees << " trees, " << compared_paths << " paths, " << ignored_somewhere
            << " decided by a pattern\n";
}

}  // namespace
}  // namespace ferry::packaging
