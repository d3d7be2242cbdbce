#include "agent/node/content_dir.hpp"

#include "agent/node/error.hpp"
#include "net/digest.hpp"
#include "packaging/unique_fd.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

result<void> write_file(const std::string& path, std::string_view text, diagnostics& diag) {
  packaging::unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd.get() < 0) {
    diag.set(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      diag.set(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
      return make_error_code(errc::cache_failed);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

result<void> make_dir(const std::string& path, diagnostics& diag) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return {};
  diag.set(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  return make_error_code(errc::cache_failed);
}

bool same_content(const std::string& path, std::string_view text) {
  packaging::unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return false;
  std::string got(text.size() + 1, '\0');  // one byte more: a longer file is told apart
  std::size_t done = 0;
  while (done < got.size()) {
    const auto n = ::read(fd.get(), got.data() + done, got.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  return std::string_view(got.data(), done) == text;
}

bool all_there(const std::string& dir, std::span<const content_file> files) {
  for (const auto& f : files) {
    const auto file = dir + "/" + std::string(f.name);
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || std::uint64_t(st.st_size) != f.text.size() ||
        !same_content(file, f.text))
      return false;
  }
  return true;
}

void remove_made(const std::string& made, std::span<const content_file> files) {
  for (const auto& f : files) ::unlink((made + "/" + std::string(f.name)).c_str());
  ::rmdir(made.c_str());
}

std::string digest_of(std::span<const content_file> files) {
  if (files.size() == 1) return net::hex_sha256(files.front().text);
  std::string all;
  for (const auto& f : files) all += fmt::format("{}\n{}\n", f.name, f.text.size()).append(f.text);
  return net::hex_sha256(all);
}

}  // namespace

result<std::string> install_content(const std::string& parent, std::string_view name, std::string_view text,
                                    diagnostics& diag) {
  const content_file file{name, text};
  return install_content(parent, std::span<const content_file>(&file, 1), diag);
}

result<std::string> install_content(const std::string& parent, std::span<const content_file> files,
                                    diagnostics& diag) {
  const auto dir = parent + "/" + digest_of(files).substr(0, 16);
  if (all_there(dir, files)) return dir;
  if (auto r = make_dir(parent, diag); !r) return r.error();
  char temp[4096];
  const auto template_path = parent + "/.tmp-XXXXXX";
  if (template_path.size() >= sizeof temp) {
    diag.set(fmt::format("{} is too long a path", parent));
    return make_error_code(errc::cache_failed);
  }
  std::memcpy(temp, template_path.c_str(), template_path.size() + 1);
  if (!::mkdtemp(temp)) {
    diag.set(fmt::format("cannot create a directory in {}: {}", parent, std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  ::chmod(temp, 0755);
  const std::string made = temp;
  for (const auto& f : files) {
    if (auto r = write_file(made + "/" + std::string(f.name), f.text, diag); !r) {
      remove_made(made, files);
      return r.error();
    }
  }
  if (::rename(made.c_str(), dir.c_str()) != 0) {
    // Another run put the same content there first.
    remove_made(made, files);
    if (!all_there(dir, files)) {
      diag.set(fmt::format("cannot put {} in {}: {}", files.front().name, dir, std::strerror(errno)));
      return make_error_code(errc::cache_failed);
    }
  }
  return dir;
}

}  // namespace ferry::agent::node
