#pragma once
// SSH keys: ferry's own ed25519 key pair, made on first use, a configured identity file, and the
// public-key facts (type, blob, fingerprint) that known_hosts and messages speak of. Private keys never
// leave this file's functions as text, and never reach a trace or a message.
#include "net/ssh_libssh.hpp"
#include "tracing/diagnostics.hpp"

#include <filesystem>
#include <string>

namespace ferry::net {

// A public key as known_hosts stores it and people compare it.
struct public_key_info {
  std::string type;         // "ssh-ed25519"
  std::string base64;       // the key blob, as in an authorized_keys line
  std::string fingerprint;  // "SHA256:...", as `ssh-keygen -lf` prints it
};

// <config dir>/id_ed25519: ferry's private key (its public half beside it, with .pub).
std::filesystem::path own_key_path(const std::filesystem::path& config_dir);

// Makes ferry's key pair if it does not exist yet (the private key mode 0600, written to a temporary
// file and linked into place, so a reader never sees half a key and two processes racing keep one
// key), or loads it. Returns the public key line "ssh-ed25519 AAAA... ferry" for authorized_keys or
// EC2's ImportKeyPair.
result<std::string> ensure_own_key(const std::filesystem::path& config_dir, diagnostics& diag);

// A private key file in OpenSSH or PEM format, without a passphrase.
result<libssh::key_ptr> load_private_key(const std::filesystem::path& file, diagnostics& diag);

// Type, blob and fingerprint of a public (or the public half of a private) key.
result<public_key_info> describe_key(ssh_key key);

// The SHA256 fingerprint of a key given as type and blob, or "" when the blob does not parse.
std::string fingerprint_of(const std::string& type, const std::string& base64);

}  // namespace ferry::net
