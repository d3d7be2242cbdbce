#pragma once
// The interpreter's answer, remembered on disk, so that a warm `ferry pack` starts no Python: starting one
// costs 40 ms, 125 ms through a pyenv shim, and a warm pack must finish in 150 ms. An answer is reused only
// while it provably still holds:
//
// - the key must match: the interpreter as configured, where it resolves on PATH, the working directory,
//   and the environment variables that change Python's answer (python_environment());
// - every witness must be unchanged. A witness is a file or directory as stat(2) sees it (mtime in ns,
//   inode, size) or its absence. They are: the resolved interpreter and sys.executable; pyvenv.cfg beside
//   either and one level above; every sys.path entry but the workspace root, and every site-packages
//   directory (a `pip install` adds .pth files and dist-info directories, which changes the directory's
//   mtime); the .pth, sitecustomize.py and usercustomize.py files in those directories (edited in place they
//   leave the directory alone); and when the resolved interpreter is a script (a launcher such as a pyenv
//   shim, which picks the version from files): $PYENV_ROOT/version and .python-version in the working
//   directory, in $PYENV_DIR, and in each of their parents, absent ones included, so that creating one
//   invalidates.
//
// The workspace root is no witness although "" stands for it in sys.path: Python puts it there by name
// whatever it holds (and the -c probe imports no sitecustomize from it), while editors touch it all the time.
//
// A witness that changed shortly before or while the probe ran (mtime within racy_margin of its start, or
// later) could describe a newer state than the answer: such an answer is not stored (git's "racily clean"
// rule), and the next run asks Python again.
//
// The cache file holds the most recent answers, one per key. It is replaced atomically (a temporary file,
// then rename); one that is damaged, of another format or unreadable is ignored, never trusted, never an
// error, and the next store rewrites it.
#include "config/xdg.hpp"
#include "packaging/discovery.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::packaging {

struct cache_key {
  std::string python;       // packaging.python as configured
  std::string resolved;     // its absolute path, found as resolve_interpreter() finds it
  std::string working_dir;  // absolute
  std::map<std::string, std::optional<std::string>> env;  // each of python_environment(); nullopt: unset

  bool operator==(const cache_key&) const = default;
};

// nullopt when the interpreter cannot be found: then there is nothing to reuse, and the probe says why.
std::optional<cache_key> make_cache_key(const std::string& python, const std::filesystem::path& working_dir,
                                        const config::env_lookup& env);

// One file as stat(2) (following symlinks) sees it.
struct witness {
  std::string path;
  bool present = false;
  std::int64_t mtime_ns = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;

  bool operator==(const witness&) const = default;
};

witness observe(const std::filesystem::path& path);

// Every witness of `answer` (see above), each path once.
std::vector<witness> gather_witnesses(const cache_key& key, const probe_answer& answer);

// Covers coarse file timestamps (the kernel stamps files from a clock that lags by up to a tick; FAT keeps
// 2 s) and small clock differences with a network file system.
inline constexpr std::chrono::seconds racy_margin{2};

// Whether a present witness was modified at or after `probe_started - racy_margin`.
bool racy(const std::vector<witness>& witnesses, std::chrono::system_clock::time_point probe_started);

// The answer stored under `key`, when every one of its witnesses is unchanged.
std::optional<probe_answer> lookup(const std::filesystem::path& cache_file, const cache_key& key);

// Stores (or replaces) the answer under `key`. False when the file could not be written: the cache is then
// cold next time, nothing worse.
bool store(const std::filesystem::path& cache_file, const cache_key& key, const std::vector<witness>& witnesses,
           const probe_answer& answer);

struct discover_options {
  std::string python = "python3";            // packaging.python
  std::filesystem::path working_dir = ".";   // the project root
  bool ship_site_packages = true;            // packaging.ship_site_packages
  std::chrono::nanoseconds timeout{std::chrono::seconds(30)};  // packaging.discover_timeout
  std::filesystem::path cache_file;          // e.g. $XDG_CACHE_HOME/ferry/discovery.json; empty: no cache
  config::env_lookup env = config::process_env();
};

// What `ferry pack` calls: the cached answer when it still holds, else run_probe() (and store its answer),
// then classify(). Traced as ferry:packaging:discover with `cached` true or false.
boost::asio::awaitable<result<discovery>> discover(tracing::action& parent, const discover_options& opts,
                                                   diagnostics& diag);

}  // namespace ferry::packaging
