// The Python API's frames (agent/api/frame.hpp), without peers: a frame comes out whole however its bytes
// were cut, sizes and ids are little-endian as the Python side packs them (struct "<IBQ"), and a size over
// the limit stops the reader.
#include "agent/api/frame.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ferry::agent::api {
namespace {

std::vector<frame> read_all(frame_reader& r) {
  std::vector<frame> out;
  while (auto f = r.next()) out.push_back(std::move(*f));
  return out;
}

TEST(api_frame, the_layout_is_the_python_sides) {
  std::string out;
  append_frame(out, 'T', 0x0102030405060708ull, "ab");
  // struct.pack("<IBQ", 2, ord("T"), 0x0102030405060708) + b"ab"
  const std::string expected("\x02\x00\x00\x00T\x08\x07\x06\x05\x04\x03\x02\x01" "ab", 15);
  EXPECT_EQ(out, expected);
}

TEST(api_frame, frames_come_out_whole_however_the_bytes_are_cut) {
  std::string stream;
  append_frame(stream, 'F', 1, std::string(1000, 'f'));
  append_frame(stream, 'E', 0, "");
  append_frame(stream, 'T', 7, "head", std::string(70000, 'x'));
  for (std::size_t cut = 1; cut < 40; ++cut) {
    frame_reader r;
    std::vector<frame> got;
    for (std::size_t at = 0; at < stream.size(); at += cut) {
      r.feed(std::span<const char>(stream.data() + at, std::min(cut, stream.size() - at)));
      for (auto& f : read_all(r)) got.push_back(std::move(f));
    }
    ASSERT_EQ(got.size(), 3u) << "cut " << cut;
    EXPECT_EQ(got[0].kind, 'F');
    EXPECT_EQ(got[0].payload, std::string(1000, 'f'));
    EXPECT_EQ(got[1].kind, 'E');
    EXPECT_TRUE(got[1].payload.empty());
    EXPECT_EQ(got[2].id, 7u);
    EXPECT_EQ(got[2].payload, "head" + std::string(70000, 'x'));
    EXPECT_EQ(r.pending(), 0u);
  }
}

TEST(api_frame, a_stream_cut_mid_frame_leaves_bytes_pending) {
  std::string stream;
  append_frame(stream, 'R', 3, "value");
  frame_reader r;
  r.feed(std::span<const char>(stream.data(), stream.size() - 1));
  EXPECT_FALSE(r.next());
  EXPECT_EQ(r.pending(), stream.size() - 1);
  EXPECT_FALSE(r.bad());
}

TEST(api_frame, a_size_over_the_limit_stops_the_reader) {
  std::string stream("\xff\xff\xff\x7fT", 5);
  stream.append(8, '\0');
  frame_reader r;
  r.feed(stream);
  EXPECT_FALSE(r.next());
  EXPECT_TRUE(r.bad());
  std::string more;
  append_frame(more, 'E', 0, "");
  r.feed(more);
  EXPECT_FALSE(r.next());  // nothing after it can be trusted
}

TEST(api_frame, integers_round_trip) {
  std::string s;
  put_u16(s, 0xbeef);
  put_u64(s, 0xfedcba9876543210ull);
  EXPECT_EQ(get_u16(s), 0xbeef);
  EXPECT_EQ(get_u64(std::string_view(s).substr(2)), 0xfedcba9876543210ull);
}

}  // namespace
}  // namespace ferry::agent::api
