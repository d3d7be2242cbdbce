#pragma once
// SHA-256 and HMAC-SHA256 for request signing and payload hashes. Both run once or more per request,
// so they reuse a prefetched digest and a per-thread context instead of OpenSSL's one-shot helpers,
// which look the algorithm up by name on every call.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace ferry::net {

using sha256_digest = std::array<unsigned char, 32>;

// Hashes bytes that arrive in pieces (a file being uploaded). Ready for update() once constructed;
// after finish(), reset() starts over.
class sha256_stream {
 public:
  sha256_stream();
  ~sha256_stream();
  sha256_stream(const sha256_stream&) = delete;
  sha256_stream& operator=(const sha256_stream&) = delete;

  void reset();
  void update(std::string_view bytes);
  void update(const unsigned char* bytes, std::size_t size);
  sha256_digest finish();

 private:
  evp_md_ctx_st* ctx_;
};

sha256_digest sha256(std::string_view bytes);
sha256_digest hmac_sha256(std::string_view key, std::string_view message);

// Lowercase hex, the form SigV4 uses everywhere.
std::string to_hex(const sha256_digest& digest);
void append_hex(std::string& out, const sha256_digest& digest);
std::string hex_sha256(std::string_view bytes);
// `bytes` random bytes from OpenSSL's generator, in lowercase hex: tokens and ids others must not guess.
std::string random_hex(std::size_t bytes);

inline std::string_view as_chars(const sha256_digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

}  // namespace ferry::net
