#include "net/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <new>
#include <stdexcept>

namespace ferry::net {
namespace {

constexpr std::size_t block_size = 64;  // SHA-256's block, to which HMAC pads its key

const EVP_MD* sha256_md() {
  // Fetched once and never released: OpenSSL tears its providers down at exit.
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (!fetched) throw std::runtime_error("OpenSSL provides no SHA256");
    return fetched;
  }();
  return md;
}

void check(int ok) {
  // Digest calls fail only when memory runs out or OpenSSL is broken: bugs, not expected failures.
  if (ok != 1) throw std::runtime_error("OpenSSL digest call failed");
}

// One reusable context per thread: a scratch object that carries no state between calls (each call
// resets it), kept only to spare the allocation and provider lookup on every signature.
sha256_stream& thread_hasher() {
  thread_local sha256_stream instance;
  return instance;
}

}  // namespace

sha256_stream::sha256_stream() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
  reset();
}

sha256_stream::~sha256_stream() { EVP_MD_CTX_free(ctx_); }

void sha256_stream::reset() { check(EVP_DigestInit_ex2(ctx_, sha256_md(), nullptr)); }

void sha256_stream::update(std::string_view bytes) { check(EVP_DigestUpdate(ctx_, bytes.data(), bytes.size())); }

void sha256_stream::update(const unsigned char* bytes, std::size_t size) { check(EVP_DigestUpdate(ctx_, bytes, size)); }

sha256_digest sha256_stream::finish() {
  sha256_digest out{};
  check(EVP_DigestFinal_ex(ctx_, out.data(), nullptr));
  return out;
}

sha256_digest sha256(std::string_view bytes) {
  auto& h = thread_hasher();
  h.reset();
  h.update(bytes);
  return h.finish();
}

// RFC 2104, over the thread's reusable context.
sha256_digest hmac_sha256(std::string_view key, std::string_view message) {
  std::array<unsigned char, block_size> pad{};
  if (key.size() > block_size) {
    const auto hashed = sha256(key);
    std::copy(hashed.begin(), hashed.end(), pad.begin());
  } else {
    std::copy(key.begin(), key.end(), pad.begin());
  }
  auto& h = thread_hasher();
  for (auto& byte : pad) byte ^= 0x36;
  h.reset();
  h.update(pad.data(), pad.size());
  h.update(message);
  const auto inner = h.finish();
  for (auto& byte : pad) byte ^= 0x36 ^ 0x5c;
  h.reset();
  h.update(pad.data(), pad.size());
  h.update(inner.data(), inner.size());
  OPENSSL_cleanse(pad.data(), pad.size());  // the pad is the key in disguise
  return h.finish();
}

void append_hex(std::string& out, const sha256_digest& digest) {
  static constexpr char digits[] = "0123456789abcdef";
  for (const unsigned char byte : digest) {
    out.push_back(digits[byte >> 4]);
    out.push_back(digits[byte & 0x0f]);
  }
}

std::string to_hex(const sha256_digest& digest) {
  std::string out;
  out.reserve(digest.size() * 2);
  append_hex(out, digest);
  return out;
}

std::string hex_sha256(std::string_view bytes) { return to_hex(sha256(bytes)); }

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size())) != 1)
    throw std::runtime_error("RAND_bytes failed");
  std::string out;
  out.reserve(2 * bytes);
  constexpr std::string_view digits = "0123456789abcdef";
  for (const char c : raw) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace ferry::net
