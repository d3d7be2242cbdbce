#pragma once
// The frames of the Python API (docs/python-api.md): between the `ferry` package and `ferry api`, and
// between `ferry api` and each worker on a node. A frame is a little-endian u32 payload size, a kind (an
// ASCII letter), a little-endian u64 id, then the payload. Sans-io: the reader is fed whatever bytes came,
// however they were cut, and hands out whole frames; the encoder appends one frame to a buffer.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ferry::agent::api {

inline constexpr std::size_t header_size = 13;
// A task's arguments or a result over this goes through storage, or is refused: a peer that says more
// is not speaking this protocol.
inline constexpr std::uint32_t max_payload = 1u << 30;

struct frame {
  char kind = 0;
  std::uint64_t id = 0;
  std::string payload;
};

// Appends the frame to `out`.
void append_frame(std::string& out, char kind, std::uint64_t id, std::string_view payload);
// The same with the payload in two parts, without joining them first.
void append_frame(std::string& out, char kind, std::uint64_t id, std::string_view head, std::string_view rest);

class frame_reader {
 public:
  void feed(std::span<const char> bytes);
  // The next whole frame, if one is in; none while the rest has not come, or once bad() is true.
  std::optional<frame> next();
  // A size over max_payload was announced: the stream cannot be read further.
  bool bad() const { return bad_; }
  // Bytes fed but not yet handed out: a stream that ends with some ended in the middle of a frame.
  std::size_t pending() const { return buffer_.size() - at_; }

 private:
  std::string buffer_;
  std::size_t at_ = 0;  // where the next frame begins in buffer_
  bool bad_ = false;
};

// Little-endian integers inside payloads.
void put_u16(std::string& out, std::uint16_t v);
void put_u64(std::string& out, std::uint64_t v);
std::uint16_t get_u16(std::string_view at);
std::uint64_t get_u64(std::string_view at);

}  // namespace ferry::agent::api
