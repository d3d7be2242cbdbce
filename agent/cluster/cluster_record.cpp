#include "agent/cluster/cluster_record.hpp"

#include "agent/error.hpp"
#include "net/atomic_file.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ferry::agent {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

json::object to_json(const cluster_record& r) {
  json::array nodes, created;
  for (const auto& n : r.nodes) nodes.emplace_back(n);
  for (const auto& n : r.created) created.emplace_back(n);
  return {{"name", r.name},           {"engine", r.engine},
          {"status", r.status},       {"pid", r.pid},
          {"pid_start", r.pid_start}, {"scheduler", r.scheduler},
          {"dashboard", r.dashboard}, {"scheduler_node", r.scheduler_node},
          {"nodes", nodes},           {"created", created},
          {"wanted", r.wanted},
          {"error", r.error},         {"log", r.log},
          {"started_at", r.started_at}};
}

std::string text(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::int64_t number(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return 0;
}

cluster_record from_json(const json::object& o) {
  cluster_record r;
  r.name = text(o, "name");
  r.engine = text(o, "engine");
  r.status = text(o, "status");
  r.pid = static_cast<int>(number(o, "pid"));
  r.pid_start = static_cast<std::uint64_t>(number(o, "pid_start"));
  r.scheduler = text(o, "scheduler");
  r.dashboard = text(o, "dashboard");
  r.scheduler_node = text(o, "scheduler_node");
  for (auto [key, into] : {std::pair{"nodes", &r.nodes}, std::pair{"created", &r.created}}) {
    if (const auto* n = o.if_contains(key); n && n->is_array())
      for (const auto& v : n->get_array())
        if (v.is_string()) into->emplace_back(v.get_string());
  }
  r.wanted = static_cast<std::size_t>(std::max<std::int64_t>(0, number(o, "wanted")));
  r.error = text(o, "error");
  r.log = text(o, "log");
  r.started_at = number(o, "started_at");
  return r;
}

}  // namespace

fs::path clusters_dir(const fs::path& state_dir) { return state_dir / "clusters"; }

fs::path record_path(const fs::path& dir, const std::string& name) { return dir / (name + ".json"); }

bool valid_cluster_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

result<void> write_record(const fs::path& dir, const cluster_record& r, diagnostics& diag) {
  return net::write_file_atomically(record_path(dir, r.name), json::serialize(to_json(r)) + "\n", diag);
}

result<std::optional<cluster_record>> read_record(const fs::path& dir, const std::string& name, diagnostics& diag) {
  const auto path = record_path(dir, name);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::optional<cluster_record>();
    diag.set(fmt::format("{}: cannot be read", path.string()));
    return error_code(errc::bad_cluster_record);
  }
  std::stringstream body;
  body << in.rdbuf();
  boost::system::error_code ec;
  const auto parsed = json::parse(body.str(), ec);
  if (ec || !parsed.is_object()) {
    diag.set(fmt::format("{}: not a cluster record ({})", path.string(), ec ? ec.message() : "not an object"));
    return error_code(errc::bad_cluster_record);
  }
  auto r = from_json(parsed.get_object());
  if (r.name != name) {
    diag.set(fmt::format("{}: names cluster '{}'", path.string(), r.name));
    return error_code(errc::bad_cluster_record);
  }
  return std::optional<cluster_record>(std::move(r));
}

std::vector<cluster_record> list_records(const fs::path& dir) {
  std::vector<cluster_record> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto file = e.path().filename().string();
    if (!file.ends_with(".json") || file.front() == '.') continue;
    diagnostics ignored;
    auto r = read_record(dir, file.substr(0, file.size() - 5), ignored);
    if (r && *r) out.push_back(std::move(**r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

void remove_record(const fs::path& dir, const std::string& name, int pid) {
  if (pid != 0) {
    diagnostics ignored;
    auto r = read_record(dir, name, ignored);
    if (r && *r && (*r)->pid != pid) return;  // a newer holder's
  }
  std::error_code ec;
  fs::remove(record_path(dir, name), ec);
}

std::uint64_t process_start(int pid) {
  if (pid <= 0) return 0;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    // A zombie (or a dead task) has ended: where PID 1 does not reap, it keeps its pid and start time.
    if (i == 3 && (field == "Z" || field == "X")) return 0;
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

bool holder_alive(const cluster_record& r) {
  const auto start = process_start(r.pid);
  return start != 0 && start == r.pid_start;
}

}  // namespace ferry::agent
