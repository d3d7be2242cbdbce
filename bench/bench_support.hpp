#pragma once
// What every bench program shares: timing a step as the best of several runs, running a peer through
// the shell, and finding the ferry binary in the same build tree.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <regex>
#include <stdexcept>
#include <string>

namespace ferry::bench {

// The fastest of `runs` runs of `f`, in seconds: the figure least disturbed by whatever else ran.
inline double best_of(int runs, const std::function<void()>& f) {
  double best = 1e9;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Runs a peer's command line; a failing peer makes the comparison meaningless, so it ends the bench.
inline void shell(const std::string& command) {
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

// A command's stdout; a failing command ends the bench, with what it printed.
inline std::string output_of(const std::string& command) {
  std::string out;
  std::FILE* p = ::popen(command.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + command);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) throw std::runtime_error("failed: " + command + "\n" + out);
  return out;
}
// A path or word in single quotes for sh (the benches' own paths hold no single quote).
// Up to the first newline: a command's one-line answer.
inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Wall time of a shell command, and its stdout.
inline double timed(const std::string& command, std::string* out = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  auto text = output_of(command);
  const double s = seconds_since(start);
  if (out) *out = std::move(text);
  return s;
}

inline std::string quote(const std::string& s) { return "'" + s + "'"; }
inline std::string quote(const std::filesystem::path& p) { return quote(p.string()); }

// build/bench/bench_x -> build/agent/ferry.
inline std::filesystem::path ferry_binary() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "agent" / "ferry";
}

// The seconds a start-up line gives `name`: field("ready in 1.31 s: pack 0.40 s ...", "pack") is 0.40.
inline double field(const std::string& line, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(name + " ([0-9.]+) s"))) throw std::runtime_error("no " + name + " in: " + line);
  return std::stod(m[1]);
}

// A bench's main: makes its world, runs it, and turns a failed step (an exception) into a message and exit 1.
template <class World, class Run>
int bench_main(const char* name, Run run) {
  World w(ferry_binary().string());
  try {
    return run(w);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace ferry::bench
