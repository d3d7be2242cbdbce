#pragma once
// What the end-to-end tests of `ferry run` on local nodes share besides their workstation
// (support/local_nodes.hpp): files written into a project, text looked for in output, venvs, traces read.
#include "support/local_nodes.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::test {

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// A venv of Debian's python3, without pip, at `dir`; its site-packages directory, or empty with the reason
// in `why` when either step failed.
inline std::filesystem::path make_venv(const std::filesystem::path& dir, std::string& why) {
  const auto venv = run({"/usr/bin/python3", "-m", "venv", "--without-pip", dir.string()});
  if (venv.exit_code != 0) {
    why = "venv: " + venv.err;
    return {};
  }
  const auto site = run({(dir / "bin" / "python").string(), "-c",
                         "import sysconfig; print(sysconfig.get_paths()['purelib'])"});
  if (site.exit_code != 0) {
    why = "the venv's site-packages: " + site.err;
    return {};
  }
  return site.out.substr(0, site.out.find('\n'));
}

// A python3 that says it is another version (sys.version_info), then runs what it was asked to run.
inline void write_python_saying(const std::filesystem::path& file, const std::string& version_tuple) {
  write_file(file, "#!/usr/bin/python3 -S\n"
                   "import runpy, sys\n"
                   "sys.version_info = (" + version_tuple + ", 'final', 0)\n"
                   "args = [a for a in sys.argv[1:] if a != '-S']\n"
                   "if args[0] == '-c':\n"
                   "    sys.argv = ['-c'] + args[2:]\n"
                   "    exec(compile(args[1], '<string>', 'exec'), {'__name__': '__main__'})\n"
                   "else:\n"
                   "    sys.argv = args\n"
                   "    runpy.run_path(args[0], run_name='__main__')\n");
  std::filesystem::permissions(file, std::filesystem::perms::owner_all | std::filesystem::perms::group_read | std::filesystem::perms::others_read);
}

// A string field of a trace line; empty when it has none.
inline std::string trace_text(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

// The type of an action's start or end, or of a message.
inline std::string trace_type(const boost::json::object& o) {
  auto t = trace_text(o, "action_type");
  return t.empty() ? trace_text(o, "message_type") : t;
}

// An action's identity, the same in its start and its end: its task and its level without the last step.
inline std::string trace_action_key(const boost::json::object& o) {
  std::string key = trace_text(o, "task_uuid");
  const auto& level = o.at("task_level").as_array();
  for (std::size_t i = 0; i + 1 < level.size(); ++i) key += "/" + std::to_string(level[i].as_int64());
  return key;
}

// Every line of one trace file.
inline std::vector<boost::json::object> trace_file_lines(const std::filesystem::path& file) {
  std::vector<boost::json::object> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(boost::json::parse(line).as_object());
  return out;
}

// Every line of the node program's trace files beside `trace` (<stem>.node-<node>-<n>.jsonl).
inline std::vector<boost::json::object> node_lines(const std::filesystem::path& trace) {
  std::vector<boost::json::object> out;
  for (const auto& e : std::filesystem::directory_iterator(trace.parent_path())) {
    const auto name = e.path().filename().string();
    if (!name.starts_with(trace.stem().string() + ".node-") || !name.ends_with(".jsonl")) continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(boost::json::parse(line).as_object());
  }
  return out;
}

// Live processes (zombies are dead: PID 1 here reaps no orphans) whose command line names `part`.
inline std::vector<std::string> processes_naming(const std::string& part) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const auto pid_text = e.path().filename().string();
    if (pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(pid_text);
    if (pid == ::getpid()) continue;
    auto cmdline = read_file(e.path() / "cmdline");
    for (auto& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(part) != std::string::npos && !dead_or_zombie(pid)) out.push_back(pid_text + ": " + cmdline);
  }
  return out;
}

// A process in the mount namespace `ns` (as /proc/PID/ns/mnt reads), for nsenter; empty when none.
inline std::string process_in_mount_namespace(const std::string& ns) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path() / "ns" / "mnt", ec).string() == ns && !ec) return name;
  }
  return {};
}

// A process in each local node's mount namespace (the nodes recorded under `home`), with the node's state
// directory; a node whose namespace no process holds has an empty pid.
inline std::vector<std::pair<std::filesystem::path, std::string>> node_mount_namespaces(const std::filesystem::path& home) {
  std::vector<std::pair<std::filesystem::path, std::string>> out;
  for (const auto& e : std::filesystem::directory_iterator(home / "state" / "ferry" / "local")) {
    if (!e.is_directory()) continue;
    const auto ns = read_file(e.path() / "mnt_ns");
    out.emplace_back(e.path(), process_in_mount_namespace(ns.substr(0, ns.find('\n'))));
  }
  return out;
}

// The id of the node (of the registry under `home`) whose address `text` names, as sshd's SSH_CONNECTION
// does (" ADDRESS "); empty when none does.
inline std::string node_named_by_address(const std::filesystem::path& home, const std::string& text) {
  const auto nodes = boost::json::parse(read_file(home / "state" / "ferry" / "nodes.json")).at("nodes").as_array();
  for (const auto& n : nodes)
    if (text.find(" " + std::string(n.at("host").as_string()) + " ") != std::string::npos)
      return std::string(n.at("id").as_string());
  return {};
}

}  // namespace ferry::test
