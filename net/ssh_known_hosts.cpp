#include "net/ssh_known_hosts.hpp"

#include "net/atomic_file.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <vector>
#include <unistd.h>

namespace ferry::net {
namespace {

struct record {
  std::string node;
  public_key_info key;
  int line = 0;
};

error_code file_error(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::known_hosts_error);
}

bool valid_node_id(std::string_view node) {
  if (node.empty() || node.front() == '#') return false;
  for (const char c : node)
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0') return false;
  return true;
}

result<std::string> read_whole(const std::filesystem::path& file, diagnostics& diag) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::string();
    return file_error(diag, fmt::format("cannot read {}: {}", file.string(), std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every record of the file, in order; a malformed line is an error naming it.
result<std::vector<record>> parse(const std::filesystem::path& file, const std::string& text, diagnostics& diag) {
  std::vector<record> out;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.empty() || line.front() == '#') continue;
    std::istringstream fields(line);
    record r;
    r.line = number;
    if (!(fields >> r.node >> r.key.type >> r.key.base64))
      return file_error(diag,
                        fmt::format("{}:{}: expected '<node id> <key type> <base64 key>'", file.string(), number));
    out.push_back(std::move(r));
  }
  return out;
}

result<std::vector<record>> load(const std::filesystem::path& file, diagnostics& diag) {
  auto text = read_whole(file, diag);
  if (!text) return text.error();
  return parse(file, *text, diag);
}

error_code append_record(const std::filesystem::path& file, std::string_view node, const public_key_info& key,
                         diagnostics& diag) {
  std::error_code fs_ec;
  if (!file.parent_path().empty()) std::filesystem::create_directories(file.parent_path(), fs_ec);
  const int fd = ::open(file.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return file_error(diag, fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
  // A hand-edited file may lack its last newline; the record must start a line of its own.
  std::string line;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') line = "\n";
  }
  line += fmt::format("{} {} {}\n", node, key.type, key.base64);
  const auto written = ::write(fd, line.data(), line.size());
  const int saved = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size()))
    return file_error(diag, fmt::format("cannot write {}: {}", file.string(), std::strerror(saved)));
  return {};
}

error_code refuse_changed(const std::filesystem::path& file, std::string_view node, const record& on_record,
                          const public_key_info& presented, diagnostics& diag) {
  const auto recorded_fingerprint = fingerprint_of(on_record.key.type, on_record.key.base64);
  diag.set(fmt::format(
      "node {} presented a different host key than the one ferry recorded for it: refusing to connect.\n"
      "  recorded ({}:{}): {} {}\n"
      "  presented: {} {}\n"
      "If the node was rebuilt, delete line {} of {} and connect again.",
      node, file.string(), on_record.line, on_record.key.type, recorded_fingerprint, presented.type,
      presented.fingerprint, on_record.line, file.string()));
  return make_error_code(errc::host_key_changed);
}

}  // namespace

result<std::optional<public_key_info>> recorded_host_key(const std::filesystem::path& file, std::string_view node,
                                                        diagnostics& diag) {
  auto records = load(file, diag);
  if (!records) return records.error();
  for (const auto& r : *records)
    if (r.node == node) return std::optional<public_key_info>(r.key);
  return std::optional<public_key_info>();
}

result<host_key_status> check_host_key(const std::filesystem::path& file, std::string_view node,
                                       const public_key_info& presented, diagnostics& diag) {
  if (!valid_node_id(node))
    return file_error(diag, fmt::format("'{}' cannot name a node in {}: node ids have no blanks", node, file.string()));
  auto records = load(file, diag);
  if (!records) return records.error();
  // Every record of the node must agree: a second, different line is as suspect as a changed key.
  bool known = false;
  for (const auto& r : *records) {
    if (r.node != node) continue;
    if (r.key.type != presented.type || r.key.base64 != presented.base64)
      return refuse_changed(file, node, r, presented, diag);
    known = true;
  }
  if (known) return host_key_status::known;
  if (auto ec = append_record(file, node, presented, diag)) return ec;
  return host_key_status::trusted;
}

error_code forget_host_key(const std::filesystem::path& file, std::string_view node, diagnostics& diag) {
  auto text = read_whole(file, diag);
  if (!text) return text.error();
  std::string kept;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first != node) kept += line + "\n";
  }
  if (kept == *text) return {};
  diagnostics why;
  if (auto written = write_file_atomically(file, kept, why, {.mode = 0600, .make_parent = false}); !written)
    return file_error(diag, why.message);
  return {};
}

}  // namespace ferry::net
