#include "net/ssh_keys.hpp"

#include "net/atomic_file.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::net {
namespace {

constexpr const char* key_comment = "ferry";

error_code key_error(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::ssh_key_error);
}

std::string errno_text() { return std::strerror(errno); }

// Writes `bytes` to a new temporary file in `dir` with `mode` and returns its path, or "" with errno set.
std::filesystem::path write_temporary(const std::filesystem::path& dir, std::string_view bytes, mode_t mode) {
  std::string name = (dir / ".ferry-key-XXXXXX").string();
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return {};
  bool ok = ::fchmod(fd, mode) == 0;
  for (std::size_t done = 0; ok && done < bytes.size();) {
    const auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (ok) return name;
  ::unlink(name.c_str());
  errno = saved;
  return {};
}

std::string public_line(const public_key_info& info) { return info.type + " " + info.base64 + " " + key_comment; }

// The .pub file beside the private key; rewritten whenever it does not hold the private key's half.
error_code write_public_file(const std::filesystem::path& path, const std::string& line, diagnostics& diag) {
  std::error_code fs_ec;
  if (std::filesystem::exists(path, fs_ec)) {
    std::string current;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[4096];
      const auto n = std::fread(buf, 1, sizeof buf, f);
      current.assign(buf, n);
      std::fclose(f);
    }
    if (current == line + "\n") return {};
  }
  diagnostics why;
  if (auto written = write_file_atomically(path, line + "\n", why, {.mode = 0644, .make_parent = false}); !written)
    return key_error(diag, "ferry's public key: " + why.message);
  return {};
}

// The private key in OpenSSH format, written to `path` unless a key is already there.
error_code create_private_key(const std::filesystem::path& path, ssh_key key, diagnostics& diag) {
  char* b64 = nullptr;
  if (ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &b64) != SSH_OK || !b64)
    return key_error(diag, "cannot encode a new ed25519 key");
  const std::string_view text(b64);
  const auto tmp = write_temporary(path.parent_path(), text, 0600);
  const int saved = errno;
  // The private key's text must not linger in freed memory.
  ::explicit_bzero(b64, text.size());
  ssh_string_free_char(b64);
  if (tmp.empty()) {
    errno = saved;
    return key_error(diag,
                     fmt::format("cannot write ferry's key in {}: {}", path.parent_path().string(), errno_text()));
  }
  // link() never replaces: if another process made the key meanwhile, its key stays and is loaded.
  const int rc = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (rc != 0 && link_errno != EEXIST) {
    errno = link_errno;
    return key_error(diag, fmt::format("cannot create ferry's key {}: {}", path.string(), errno_text()));
  }
  return {};
}

error_code make_config_dir(const std::filesystem::path& dir, diagnostics& diag) {
  std::error_code fs_ec;
  if (std::filesystem::is_directory(dir, fs_ec)) return {};
  std::filesystem::create_directories(dir, fs_ec);
  if (fs_ec) return key_error(diag, fmt::format("cannot create {}: {}", dir.string(), fs_ec.message()));
  // Only the owner reads ferry's configuration directory: it holds the private key.
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, fs_ec);
  return {};
}

}  // namespace

std::filesystem::path own_key_path(const std::filesystem::path& config_dir) { return config_dir / "id_ed25519"; }

result<libssh::key_ptr> load_private_key(const std::filesystem::path& file, diagnostics& diag) {
  ssh_key raw = nullptr;
  const int rc = ssh_pki_import_privkey_file(file.c_str(), nullptr, nullptr, nullptr, &raw);
  libssh::key_ptr key(raw);
  if (rc == SSH_OK && key) return key;
  std::error_code fs_ec;
  if (!std::filesystem::exists(file, fs_ec))
    return key_error(diag, fmt::format("SSH key {} does not exist", file.string()));
  return key_error(diag, fmt::format("cannot load the SSH key {}: not a private key ferry can read "
                                     "(OpenSSH or PEM format, without a passphrase)",
                                     file.string()));
}

result<public_key_info> describe_key(ssh_key key) {
  libssh::key_ptr demoted;
  ssh_key pub = key;
  if (ssh_key_is_private(key)) {
    ssh_key raw_public = nullptr;
    if (ssh_pki_export_privkey_to_pubkey(key, &raw_public) != SSH_OK) return make_error_code(errc::ssh_key_error);
    demoted.reset(raw_public);
    pub = raw_public;
  }
  char* b64 = nullptr;
  if (ssh_pki_export_pubkey_base64(pub, &b64) != SSH_OK || !b64) return make_error_code(errc::ssh_key_error);
  libssh::string_ptr blob(b64);
  unsigned char* hash = nullptr;
  std::size_t hash_size = 0;
  if (ssh_get_publickey_hash(pub, SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_size) != 0)
    return make_error_code(errc::ssh_key_error);
  libssh::string_ptr fingerprint(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_size));
  ssh_clean_pubkey_hash(&hash);
  public_key_info info;
  info.type = ssh_key_type_to_char(ssh_key_type(pub));
  info.base64 = blob.get();
  info.fingerprint = fingerprint ? fingerprint.get() : "";
  return info;
}

std::string fingerprint_of(const std::string& type, const std::string& base64) {
  ssh_key raw = nullptr;
  if (ssh_pki_import_pubkey_base64(base64.c_str(), ssh_key_type_from_name(type.c_str()), &raw) != SSH_OK) return "";
  libssh::key_ptr key(raw);
  auto info = describe_key(key.get());
  return info ? info->fingerprint : "";
}

result<std::string> ensure_own_key(const std::filesystem::path& config_dir, diagnostics& diag) {
  const auto path = own_key_path(config_dir);
  std::error_code fs_ec;
  if (!std::filesystem::exists(path, fs_ec)) {
    if (auto ec = make_config_dir(config_dir, diag)) return ec;
    ssh_key raw = nullptr;
    if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &raw) != SSH_OK)
      return key_error(diag, "cannot generate an ed25519 key");
    libssh::key_ptr generated(raw);
    if (auto ec = create_private_key(path, generated.get(), diag)) return ec;
  }
  auto key = load_private_key(path, diag);
  if (!key) return key.error();
  auto info = describe_key(key->get());
  if (!info) return key_error(diag, fmt::format("cannot derive the public key of {}", path.string()));
  const auto line = public_line(*info);
  auto pub_path = path;
  pub_path += ".pub";
  if (auto ec = write_public_file(pub_path, line, diag)) return ec;
  return line;
}

}  // namespace ferry::net
