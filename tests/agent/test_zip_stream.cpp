// The node program's zip reader, without I/O: the central directory read from a zip's end, then its body
// fed in pieces of every size, cut at every byte, damaged at every content byte, with a receiver that
// fails at every call. Zips come from Python's zipfile (tests/peers/make_zip.py).
#include "agent/node/error.hpp"
#include "agent/node/zip_stream.hpp"

#include "support/random_bytes.hpp"
#include "zip_fixture.hpp"

#include <gtest/gtest.h>

#include <random>

namespace ferry::agent::node {
namespace {

using test_zip::make_zip;
using test_zip::open_zip;
using test_zip::spec_entry;

using test::random_bytes;

// Keeps what arrives; fails at its `fail_at`-th call (counting begin, data and end alike) when set.
class collector final : public entry_sink {
 public:
  struct got {
    std::string name;
    std::string data;
    std::uint32_t mode = 0;
    bool ended = false;
  };
  std::vector<got> entries;
  int calls = 0;
  int fail_at = 0;

  result<void> begin(const zip_entry& e, diagnostics& diag) override {
    if (auto r = step(diag); !r) return r;
    entries.push_back({e.name, {}, e.mode, false});
    return {};
  }
  result<void> data(std::string_view bytes, diagnostics& diag) override {
    if (auto r = step(diag); !r) return r;
    entries.back().data.append(bytes);
    return {};
  }
  result<void> end(diagnostics& diag) override {
    if (auto r = step(diag); !r) return r;
    entries.back().ended = true;
    return {};
  }

 private:
  result<void> step(diagnostics& diag) {
    if (++calls == fail_at) {
      diag.set("the receiver failed");
      return make_error_code(errc::cache_failed);
    }
    return {};
  }
};

// Reads `zip` fed in pieces of `chunk` bytes; the error of the first step that failed.
error_code read_zip(std::string_view zip, std::size_t chunk, collector& sink, diagnostics& diag) {
  auto opened = open_zip(zip, diag);
  if (!opened) return opened.error();
  zip_stream stream(opened->entries, opened->tail.directory_offset);
  const auto body = zip.substr(0, opened->tail.directory_offset);
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    if (auto r = stream.feed(body.substr(at, chunk), sink, diag); !r) return r.error();
  }
  auto done = stream.finish(diag);
  return done ? error_code{} : done.error();
}

std::vector<spec_entry> ordinary_entries() {
  return {{"pkg/", "", 0755},
          {"pkg/__init__.py", "X = 1\n"},
          {"pkg/empty.txt", ""},
          {"pkg/stored.bin", random_bytes(5000, 1), 0600, false, false},
          {"pkg/compressible.txt", std::string(300000, 'a') + "end", 0644},
          {"pkg/random.bin", random_bytes(70000, 2), 0755},
          {"pkg/link.py", "__init__.py", 0777, true},
          {"new\nline", "n"},
          {"data", "plain"},
          {"data;1", "versioned"}};
}

TEST(zip_stream, extracts_every_entry_byte_for_byte_however_the_body_is_cut_into_pieces) {
  const auto entries = ordinary_entries();
  const auto zip = make_zip(entries);
  for (std::size_t chunk : {std::size_t(1), std::size_t(7), std::size_t(4096), std::size_t(65536), zip.size()}) {
    collector sink;
    diagnostics diag;
    ASSERT_FALSE(read_zip(zip, chunk, sink, diag)) << "chunk " << chunk << ": " << diag.message;
    ASSERT_EQ(sink.entries.size(), entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(sink.entries[i].name, entries[i].name);
      EXPECT_EQ(sink.entries[i].data, entries[i].data) << entries[i].name;
      EXPECT_EQ(sink.entries[i].mode & 0777, entries[i].mode) << entries[i].name;
      EXPECT_TRUE(sink.entries[i].ended);
    }
  }
}

TEST(zip_stream, a_zip_cut_short_at_any_byte_fails_as_damaged) {
  const auto zip = make_zip({{"a.py", "print(1)\n" + std::string(2000, 'x')}, {"b.bin", random_bytes(3000, 3), 0644, false, false}});
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  const auto body = std::string_view(zip).substr(0, opened->tail.directory_offset);
  for (std::size_t cut = 0; cut < body.size(); ++cut) {
    zip_stream stream(opened->entries, opened->tail.directory_offset);
    collector sink;
    diagnostics d;
    ASSERT_TRUE(stream.feed(body.substr(0, cut), sink, d)) << "cut " << cut << ": " << d.message;
    auto done = stream.finish(d);
    ASSERT_FALSE(done) << "a body cut at byte " << cut << " was taken for whole";
    EXPECT_EQ(done.error(), make_error_code(errc::bad_zip));
  }
  // The directory cut anywhere, or the end records, are refused too.
  for (std::size_t cut = 0; cut < zip.size(); ++cut) {
    diagnostics d;
    auto reopened = open_zip(std::string_view(zip).substr(0, cut), d);
    if (reopened) {
      // A prefix can only look whole if its end records really are there; the zip above has none early.
      ADD_FAILURE() << "a zip cut at byte " << cut << " opened";
    }
  }
}

TEST(zip_stream, a_damaged_byte_anywhere_in_the_content_fails_the_entry) {
  const auto zip = make_zip({{"deflated.txt", std::string(4000, 'q') + random_bytes(500, 4)},
                             {"stored.bin", random_bytes(600, 5), 0644, false, false}});
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  for (const auto& e : opened->entries) {
    const auto start = e.local_offset + 30 + e.name.size();  // zipfile writes no local extra field
    for (std::uint64_t at = start; at < start + e.compressed; ++at) {
      auto damaged = zip;
      damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
      collector sink;
      diagnostics d;
      const auto ec = read_zip(damaged, 4096, sink, d);
      ASSERT_EQ(ec, make_error_code(errc::bad_zip)) << e.name << " byte " << at << " damaged, and read: " << d.message;
    }
  }
}

TEST(zip_stream, an_entry_inflating_past_its_size_stops_at_the_first_byte_too_many) {
  const auto zip = make_zip({{"bomb.txt", std::string(1 << 20, 'z')}});
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  auto entries = opened->entries;
  entries[0].size = 1000;  // what a lying directory would say
  zip_stream stream(entries, opened->tail.directory_offset);
  collector sink;
  auto fed = stream.feed(std::string_view(zip).substr(0, opened->tail.directory_offset), sink, diag);
  ASSERT_FALSE(fed);
  EXPECT_EQ(fed.error(), make_error_code(errc::bad_zip));
  EXPECT_NE(diag.message.find("more than its 1000 bytes"), std::string::npos) << diag.message;
  ASSERT_EQ(sink.entries.size(), 1u);
  EXPECT_LE(sink.entries[0].data.size(), 1000u);
}

// zstd entries (method 93) beside deflate and stored ones: whole in one frame, in several frames, empty, larger
// than the reader's output buffer, and incompressible.
std::vector<spec_entry> zstd_entries() {
  auto zstd = [](std::string name, std::string data, int frames = 1) {
    spec_entry e{std::move(name), std::move(data)};
    e.zstd = true;
    e.zstd_frames = frames;
    return e;
  };
  return {{"pkg/", "", 0755},
          zstd("pkg/__init__.py", "X = 1\n"),
          zstd("pkg/empty.txt", ""),
          {"pkg/deflated.txt", std::string(5000, 'd') + "end"},
          zstd("pkg/big.txt", std::string(1 << 20, 'a') + random_bytes(3000, 6) + std::string(300000, 'b')),
          zstd("pkg/frames.txt", std::string(100000, 'f') + random_bytes(2000, 7), 3),
          zstd("pkg/random.bin", random_bytes(70000, 8)),
          {"pkg/stored.bin", random_bytes(500, 9), 0600, false, false}};
}

TEST(zip_stream, extracts_zstd_entries_byte_for_byte_however_the_body_is_cut_into_pieces) {
  const auto entries = zstd_entries();
  const auto zip = make_zip(entries);
  for (std::size_t chunk : {std::size_t(1), std::size_t(7), std::size_t(4096), std::size_t(65536), zip.size()}) {
    collector sink;
    diagnostics diag;
    ASSERT_FALSE(read_zip(zip, chunk, sink, diag)) << "chunk " << chunk << ": " << diag.message;
    ASSERT_EQ(sink.entries.size(), entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(sink.entries[i].name, entries[i].name);
      EXPECT_EQ(sink.entries[i].data, entries[i].data) << entries[i].name;
      EXPECT_EQ(sink.entries[i].mode & 0777, entries[i].mode) << entries[i].name;
      EXPECT_TRUE(sink.entries[i].ended);
    }
  }
}

TEST(zip_stream, a_zstd_entry_cut_short_or_damaged_at_any_byte_is_refused_naming_it) {
  spec_entry e{"pkg/mod.py", std::string(3000, 'm') + random_bytes(400, 10)};
  e.zstd = true;
  e.zstd_frames = 2;
  const auto zip = make_zip({e, {"after.txt", "after"}});
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  const auto& entry = opened->entries[0];
  ASSERT_EQ(entry.method, 93);
  const auto start = entry.local_offset + 30 + entry.name.size();
  for (std::uint64_t at = start; at < start + entry.compressed; ++at) {
    auto damaged = zip;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    collector sink;
    diagnostics d;
    ASSERT_EQ(read_zip(damaged, 4096, sink, d), make_error_code(errc::bad_zip)) << "byte " << at << " damaged, and read";
    EXPECT_NE(d.message.find("'pkg/mod.py'"), std::string::npos) << d.message;
  }
  // A directory that ends the entry early leaves its last frame unfinished.
  for (std::uint64_t cut = 1; cut < entry.compressed; ++cut) {
    auto entries = opened->entries;
    entries[0].compressed = cut;
    zip_stream stream(entries, opened->tail.directory_offset);
    collector sink;
    diagnostics d;
    auto fed = stream.feed(std::string_view(zip).substr(0, opened->tail.directory_offset), sink, d);
    ASSERT_FALSE(fed) << "an entry cut to " << cut << " bytes was read";
    EXPECT_EQ(fed.error(), make_error_code(errc::bad_zip));
    EXPECT_NE(d.message.find("'pkg/mod.py'"), std::string::npos) << d.message;
  }
}

TEST(zip_stream, a_corrupt_zstd_frame_is_refused_as_one_naming_the_entry) {
  spec_entry e{"pkg/data.bin", std::string(10000, 'z')};
  e.zstd = true;
  auto zip = make_zip({e});
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  const auto start = opened->entries[0].local_offset + 30 + opened->entries[0].name.size();
  zip[start] = 'X';  // the frame's magic number
  collector sink;
  diagnostics d;
  ASSERT_EQ(read_zip(zip, 4096, sink, d), make_error_code(errc::bad_zip));
  EXPECT_NE(d.message.find("entry 'pkg/data.bin' does not decompress as zstd"), std::string::npos) << d.message;
}

TEST(zip_stream, a_zstd_entry_decompressing_past_its_size_stops_at_the_first_byte_too_many) {
  spec_entry e{"bomb.txt", std::string(1 << 20, 'z')};
  e.zstd = true;
  const auto zip = make_zip({e});
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  auto entries = opened->entries;
  entries[0].size = 1000;
  zip_stream stream(entries, opened->tail.directory_offset);
  collector sink;
  auto fed = stream.feed(std::string_view(zip).substr(0, opened->tail.directory_offset), sink, diag);
  ASSERT_FALSE(fed);
  EXPECT_NE(diag.message.find("more than its 1000 bytes"), std::string::npos) << diag.message;
  ASSERT_EQ(sink.entries.size(), 1u);
  EXPECT_LE(sink.entries[0].data.size(), 1000u);
}

TEST(zip_stream, a_receiver_failing_at_any_call_stops_the_stream_with_its_error) {
  const auto zip = make_zip(ordinary_entries());
  collector full;
  diagnostics diag;
  ASSERT_FALSE(read_zip(zip, 8192, full, diag)) << diag.message;
  for (int k = 1; k <= full.calls; ++k) {
    collector sink;
    sink.fail_at = k;
    diagnostics d;
    EXPECT_EQ(read_zip(zip, 8192, sink, d), make_error_code(errc::cache_failed)) << "call " << k;
    EXPECT_EQ(sink.calls, k) << "the stream went on after call " << k << " failed";
    EXPECT_EQ(d.message, "the receiver failed");
  }
}

TEST(zip_tail, finds_the_directory_behind_a_comment_and_in_zip64) {
  for (bool zip64 : {false, true}) {
    const auto zip = make_zip({{"a", "alpha", 0644, false, true, zip64}, {"b", "beta", 0644, false, false, zip64}},
                              std::string(1000, 'c'));
    collector sink;
    diagnostics diag;
    ASSERT_FALSE(read_zip(zip, 100, sink, diag)) << diag.message;
    ASSERT_EQ(sink.entries.size(), 2u);
    EXPECT_EQ(sink.entries[1].data, "beta");
  }
}

// Little-endian bytes of `value`, `width` of them.
std::string le(std::uint64_t value, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

// The end of an empty Zip64 archive: its Zip64 end record, the locator that points at `record`, and an
// end record whose fields all say "see Zip64".
std::string zip64_tail(std::uint64_t record) {
  const std::string zip64_end = le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4) +
                                le(0, 8) + le(0, 8) + le(0, 8) + le(0, 8);
  const std::string locator = le(0x07064b50, 4) + le(0, 4) + le(record, 8) + le(1, 4);
  const std::string end = le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(0xffff, 2) + le(0xffff, 2) +
                          le(0xffffffff, 4) + le(0xffffffff, 4) + le(0, 2);
  return zip64_end + locator + end;
}

// The Zip64 locator's record offset comes from the shard's bytes, before its SHA-256 can be checked: an
// offset near 2^64 wrapped the bounds check and read far outside the tail.
TEST(zip_tail, a_zip64_locator_pointing_anywhere_outside_the_tail_is_refused) {
  diagnostics diag;
  const auto good = zip64_tail(0);
  ASSERT_TRUE(parse_tail(good, good.size(), diag)) << diag.message;
  for (const std::uint64_t record : {~std::uint64_t{0}, ~std::uint64_t{0} - 1000, std::uint64_t{1} << 63,
                                     std::uint64_t{1}, std::uint64_t{good.size()}}) {
    const auto bad = zip64_tail(record);
    diag.clear();
    const auto tail = parse_tail(bad, bad.size(), diag);
    ASSERT_FALSE(tail) << record;
    EXPECT_EQ(tail.error(), make_error_code(errc::bad_zip));
    EXPECT_EQ(diag.message, "the Zip64 end record is not where its locator says") << record;
  }
}

TEST(zip_tail, a_directory_that_claims_more_entries_than_fit_is_refused_before_any_allocation) {
  zip_tail tail{0, 46, 1'000'000'000};
  diagnostics diag;
  auto r = parse_directory(std::string(46, '\0'), tail, diag);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::bad_zip));
}

}  // namespace
}  // namespace ferry::agent::node
