#include "agent/api/frame.hpp"

namespace ferry::agent::api {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_u32(std::string_view at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(at[i])) << (8 * i);
  return v;
}

}  // namespace

void put_u16(std::string& out, std::uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint16_t get_u16(std::string_view at) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(at[0]) |
                                    (static_cast<unsigned>(static_cast<unsigned char>(at[1])) << 8));
}

std::uint64_t get_u64(std::string_view at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(at[i])) << (8 * i);
  return v;
}

void append_frame(std::string& out, char kind, std::uint64_t id, std::string_view head, std::string_view rest) {
  put_u32(out, static_cast<std::uint32_t>(head.size() + rest.size()));
  out.push_back(kind);
  put_u64(out, id);
  out.append(head);
  out.append(rest);
}

void append_frame(std::string& out, char kind, std::uint64_t id, std::string_view payload) {
  append_frame(out, kind, id, payload, {});
}

void frame_reader::feed(std::span<const char> bytes) {
  // What was handed out goes once it is most of the buffer: appends stay amortised, frames are not moved
  // byte by byte after each one.
  if (at_ > 0 && at_ * 2 >= buffer_.size()) {
    buffer_.erase(0, at_);
    at_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
}

std::optional<frame> frame_reader::next() {
  if (bad_ || pending() < header_size) return std::nullopt;
  const std::string_view rest(buffer_.data() + at_, pending());
  const auto size = get_u32(rest);
  if (size > max_payload) {
    bad_ = true;
    return std::nullopt;
  }
  if (rest.size() < header_size + size) return std::nullopt;
  frame f{rest[4], get_u64(rest.substr(5)), std::string(rest.substr(header_size, size))};
  at_ += header_size + size;
  return f;
}

}  // namespace ferry::agent::api
