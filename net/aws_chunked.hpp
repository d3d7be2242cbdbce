#pragma once
// S3's aws-chunked content encoding with a trailing checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER): the
// body goes out as HTTP-style chunks and ends with an x-amz-checksum-sha256 trailer that S3 checks
// against what it received. The SHA-256 is computed while the bytes stream, so a large PUT needs no
// pass over the file before sending, and the object still never lands with bytes that changed on the way.
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::net::aws_chunked {

inline constexpr std::string_view content_sha256 = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
// The size each chunk header declares, whatever the size of the writes behind it. The largest PUT
// (5 GiB) fits one chunk: servers that reassemble chunks by concatenation copy the body only once.
inline constexpr std::uint64_t chunk_size = 5ULL << 30;
inline constexpr std::string_view trailer_name = "x-amz-checksum-sha256";

// "<hex size>\r\n" before a chunk's bytes; "\r\n" follows them.
std::string chunk_header(std::uint64_t size);
inline constexpr std::string_view chunk_end = "\r\n";

// The last, empty chunk and the trailer carrying the base64 SHA-256 of the whole decoded body.
std::string final_chunk(std::string_view sha256_base64);

// The encoded size of `length` bytes sent in chunks of `chunk` bytes: the Content-Length to send.
std::uint64_t encoded_length(std::uint64_t length, std::uint64_t chunk);

}  // namespace ferry::net::aws_chunked
