#include "net/aws_chunked.hpp"

#include <fmt/format.h>

namespace ferry::net::aws_chunked {

std::string chunk_header(std::uint64_t size) { return fmt::format("{:x}\r\n", size); }

std::string final_chunk(std::string_view sha256_base64) {
  return fmt::format("0\r\n{}:{}\r\n\r\n", trailer_name, sha256_base64);
}

std::uint64_t encoded_length(std::uint64_t length, std::uint64_t chunk) {
  std::uint64_t total = 0;
  const std::uint64_t full = length / chunk;
  const std::uint64_t rest = length % chunk;
  total += full * (chunk_header(chunk).size() + chunk + chunk_end.size());
  if (rest) total += chunk_header(rest).size() + rest + chunk_end.size();
  // A SHA-256 is 44 characters of base64.
  return total + final_chunk(std::string(44, '=')).size();
}

}  // namespace ferry::net::aws_chunked
