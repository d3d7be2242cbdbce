#include "packaging/discovery_cache.hpp"

#include "net/atomic_file.hpp"

#include "packaging/python_probe.hpp"
#include "tracing/action_types.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::packaging {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view format_name = "ferry-discovery-2";
constexpr std::size_t max_entries = 32;  // one per project and interpreter a person switches between

// ---- witnesses -----------------------------------------------------------------------------------------

class witness_list {
 public:
  void add(const fs::path& p) {
    if (!p.empty() && seen_.insert(p.string()).second) list_.push_back(observe(p));
  }
  // The files in `dir` that change what site.py does even when the directory's mtime stays.
  void add_startup_files(const fs::path& dir) {
    error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const auto name = it->path().filename().string();
      if (name.ends_with(".pth") || name == "sitecustomize.py" || name == "usercustomize.py") add(it->path());
    }
  }
  std::vector<witness> take() { return std::move(list_); }

 private:
  std::set<std::string> seen_;
  std::vector<witness> list_;
};

// A launcher script (a pyenv shim) rather than an interpreter: it starts with "#!".
bool is_script(const fs::path& p) {
  char head[2] = {};
  std::ifstream in(p, std::ios::binary);
  return in.read(head, 2) && head[0] == '#' && head[1] == '!';
}

std::optional<std::string> env_of(const cache_key& key, const std::string& name) {
  const auto it = key.env.find(name);
  return it == key.env.end() ? std::nullopt : it->second;
}

// Where pyenv looks for the version to run: .python-version from PYENV_DIR (default: the working directory)
// up to /, then $PYENV_ROOT/version.
void add_pyenv_files(const cache_key& key, witness_list& out) {
  const fs::path working_dir(key.working_dir);
  std::vector<fs::path> starts{working_dir};
  if (const auto dir = env_of(key, "PYENV_DIR"); dir && !dir->empty()) starts.push_back(absolute_in(*dir, working_dir));
  for (auto dir : starts) {
    for (;; dir = dir.parent_path()) {
      out.add(dir / ".python-version");
      if (dir == dir.root_path() || dir.empty()) break;
    }
  }
  const auto root = env_of(key, "PYENV_ROOT");
  const auto home = env_of(key, "HOME");
  if (root && !root->empty())
    out.add(fs::path(*root) / "version");
  else if (home && !home->empty())
    out.add(fs::path(*home) / ".pyenv" / "version");
}

// ---- the file -------------------------------------------------------------------------------------------

json::value to_json(const cache_key& key) {
  json::object env;
  for (const auto& [name, value] : key.env) {
    if (value)
      env[name] = *value;
    else
      env[name] = nullptr;
  }
  return json::object{{"python", key.python},
                      {"resolved", key.resolved},
                      {"working_dir", key.working_dir},
                      {"env", std::move(env)}};
}

json::value to_json(const witness& w) {
  if (!w.present) return json::array{w.path, nullptr};
  return json::array{w.path, w.mtime_ns, w.inode, w.size};
}

// Boost.JSON parses a number that fits into int64 as one, whatever it was serialized from.
std::optional<std::uint64_t> unsigned_of(const json::value& v) {
  if (const auto* u = v.if_uint64()) return *u;
  if (const auto* i = v.if_int64(); i && *i >= 0) return static_cast<std::uint64_t>(*i);
  return std::nullopt;
}

std::optional<witness> witness_from(const json::value& v) {
  const auto* a = v.if_array();
  if (!a || a->empty() || !a->at(0).is_string()) return std::nullopt;
  witness w{std::string(a->at(0).as_string())};
  if (a->size() == 2 && a->at(1).is_null()) return w;
  if (a->size() != 4) return std::nullopt;
  const auto* mtime = a->at(1).if_int64();
  const auto inode = unsigned_of(a->at(2));
  const auto size = unsigned_of(a->at(3));
  if (!mtime || !inode || !size) return std::nullopt;
  w.present = true;
  w.mtime_ns = *mtime, w.inode = *inode, w.size = *size;
  return w;
}

// Whether every stored witness still looks the same. Anything malformed counts as changed.
bool still_holds(const json::value& witnesses) {
  const auto* list = witnesses.if_array();
  if (!list) return false;
  for (const auto& v : *list) {
    const auto stored = witness_from(v);
    if (!stored || observe(stored->path) != *stored) return false;
  }
  return true;
}

// The file's entries; none when it is missing, unreadable, damaged or of another format.
json::array read_entries(const fs::path& cache_file) {
  std::ifstream in(cache_file, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  json::parse_options options;
  options.allow_invalid_utf8 = true;  // paths are bytes
  error_code ec;
  auto doc = json::parse(text.str(), ec, {}, options);
  const auto* o = ec ? nullptr : doc.if_object();
  const auto* format = o ? o->if_contains("format") : nullptr;
  if (!format || !format->is_string() || format->as_string() != format_name) return {};
  const auto* entries = o->if_contains("entries");
  if (!entries || !entries->is_array()) return {};
  return entries->as_array();
}

bool write_atomically(const fs::path& file, const std::string& text) {
  diagnostics ignored;  // the cache only saves time: a failed write is a miss next time
  return static_cast<bool>(net::write_file_atomically(file, text, ignored));
}

// ---- discover ---------------------------------------------------------------------------------------------

struct found_answer {
  probe_answer answer;
  bool cached = false;
  bool stored = false;
};

asio::awaitable<result<found_answer>> find_answer(tracing::action& act, const discover_options& opts,
                                                  diagnostics& diag) {
  std::optional<cache_key> key;
  if (!opts.cache_file.empty()) key = make_cache_key(opts.python, opts.working_dir, opts.env);
  if (key) {
    if (auto hit = lookup(opts.cache_file, *key)) co_return found_answer{std::move(*hit), true};
  }
  const auto started = std::chrono::system_clock::now();
  const probe_request request{opts.python, opts.working_dir, opts.timeout, opts.env};
  auto answer = co_await run_probe(act, request, diag);
  if (!answer) co_return answer.error();
  found_answer out{std::move(*answer)};
  if (key) {
    const auto witnesses = gather_witnesses(*key, out.answer);
    out.stored = !racy(witnesses, started) && store(opts.cache_file, *key, witnesses, out.answer);
  }
  co_return out;
}

}  // namespace

std::optional<cache_key> make_cache_key(const std::string& python, const fs::path& working_dir,
                                        const config::env_lookup& env) {
  const auto resolved = resolve_interpreter(python, working_dir, env);
  if (!resolved) return std::nullopt;
  error_code ec;
  const auto dir = fs::absolute(working_dir, ec).lexically_normal();
  if (ec) return std::nullopt;
  cache_key key{python, resolved->string(), dir.string()};
  for (const auto name : python_environment()) key.env[std::string(name)] = env(name);
  return key;
}

witness observe(const fs::path& path) {
  witness w{path.string()};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return w;
  w.present = true;
  w.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  w.inode = st.st_ino;
  w.size = static_cast<std::uint64_t>(st.st_size);
  return w;
}

std::vector<witness> gather_witnesses(const cache_key& key, const probe_answer& answer) {
  const fs::path working_dir(key.working_dir);
  witness_list out;
  const fs::path resolved(key.resolved);
  out.add(resolved);
  if (!answer.executable.empty()) out.add(answer.executable);
  for (const auto& exe : {resolved, fs::path(answer.executable)}) {
    if (exe.empty()) continue;
    out.add(exe.parent_path() / "pyvenv.cfg");
    out.add(exe.parent_path().parent_path() / "pyvenv.cfg");
  }

  std::vector<fs::path> dirs;
  for (const auto& entry : answer.sys_path) {
    const auto p = absolute_in(entry, working_dir);
    if (entry.empty() || p == working_dir) continue;  // the workspace root: see the header
    dirs.push_back(p);
  }
  for (const auto& site : answer.site_packages) dirs.push_back(absolute_in(site, working_dir));
  for (const auto* p : {&answer.purelib, &answer.platlib})
    if (!p->empty()) dirs.push_back(absolute_in(*p, working_dir));
  if (answer.user_site) dirs.push_back(absolute_in(*answer.user_site, working_dir));
  for (const auto& dir : dirs) {
    out.add(dir);
    out.add_startup_files(dir);
  }

  if (is_script(resolved)) add_pyenv_files(key, out);
  return out.take();
}

bool racy(const std::vector<witness>& witnesses, std::chrono::system_clock::time_point probe_started) {
  const auto since = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         (probe_started - racy_margin).time_since_epoch())
                         .count();
  for (const auto& w : witnesses)
    if (w.present && w.mtime_ns >= since) return true;
  return false;
}

std::optional<probe_answer> lookup(const fs::path& cache_file, const cache_key& key) {
  const auto wanted = to_json(key);
  for (const auto& entry : read_entries(cache_file)) {
    const auto* o = entry.if_object();
    const auto* k = o ? o->if_contains("key") : nullptr;
    if (!k || *k != wanted) continue;
    const auto* witnesses = o->if_contains("witnesses");
    const auto* answer = o->if_contains("answer");
    if (!witnesses || !answer || !still_holds(*witnesses)) return std::nullopt;
    diagnostics ignored;
    auto parsed = parse_probe_answer(*answer, ignored);
    if (!parsed) return std::nullopt;
    return std::move(*parsed);
  }
  return std::nullopt;
}

bool store(const fs::path& cache_file, const cache_key& key, const std::vector<witness>& witnesses,
           const probe_answer& answer) {
  json::array listed;
  for (const auto& w : witnesses) listed.push_back(to_json(w));
  const auto wanted = to_json(key);
  json::array entries;
  entries.push_back(json::object{{"key", wanted}, {"witnesses", std::move(listed)}, {"answer", to_json(answer)}});
  for (auto& old : read_entries(cache_file)) {
    if (entries.size() >= max_entries) break;
    const auto* o = old.if_object();
    const auto* k = o ? o->if_contains("key") : nullptr;
    if (k && *k != wanted) entries.push_back(std::move(old));
  }
  const json::object doc{{"format", format_name}, {"entries", std::move(entries)}};
  return write_atomically(cache_file, json::serialize(doc));
}

asio::awaitable<result<discovery>> discover(tracing::action& parent, const discover_options& opts,
                                            diagnostics& diag) {
  const auto dir = opts.working_dir.string();
  auto act = parent.child(action_types::packaging::discover, {{"python", opts.python}, {"working_dir", dir}});
  auto found = co_await find_answer(act, opts, diag);
  if (!found) {
    act.fail(found.error(), diag, {{"cached", false}});
    co_return found.error();
  }
  auto classified = classify(found->answer, opts.working_dir, opts.ship_site_packages, diag);
  if (!classified) {
    act.fail(classified.error(), diag, {{"cached", found->cached}});
    co_return classified.error();
  }
  act.succeed({{"cached", found->cached},
               {"cache_stored", found->stored},
               {"version", classified->version},
               {"entries", classified->entries.size()}});
  co_return classified;
}

}  // namespace ferry::packaging
