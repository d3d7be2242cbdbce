// The node program's zip reader, without I/O: the central directory read from a zip's end, then its body
// fed in pieces of every size, cut at every byte, damaged at every content byte, with a receiver that
// fails at every call. Zips come from Python's zipfile (tests/peers/make_zip.py).
#include "agent/node/error.hpp"
#include "agent/node/zip_stream.hpp"

#include "support/random_bytes.hpp"
#include "zip_fixture.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zstd.h>

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

// The zip of `entries`, fed in pieces of several sizes, gives back every entry whole: name, bytes and mode.
void expect_whole_however_cut(const std::vector<spec_entry>& entries) {
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

TEST(zip_stream, extracts_every_entry_byte_for_byte_however_the_body_is_cut_into_pieces) {
  expect_whole_however_cut(ordinary_entries());
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

spec_entry zstd(std::string name, std::string data) {
  spec_entry e{std::move(name), std::move(data)};
  e.zstd = true;
  return e;
}

// zstd entries (method 93) beside deflate and stored ones: in one frame, in frames of 4 MiB with a seek table,
// empty, larger than the reader's output buffer, and incompressible.
std::vector<spec_entry> zstd_entries() {
  return {{"pkg/", "", 0755},
          zstd("pkg/__init__.py", "X = 1\n"),
          zstd("pkg/empty.txt", ""),
          {"pkg/deflated.txt", std::string(5000, 'd') + "end"},
          zstd("pkg/big.txt", std::string(1 << 20, 'a') + random_bytes(3000, 6) + std::string(300000, 'b')),
          zstd("pkg/frames.txt", std::string(8 << 20, 'f') + random_bytes(2000, 7)),
          zstd("pkg/random.bin", random_bytes(70000, 8)),
          {"pkg/stored.bin", random_bytes(500, 9), 0600, false, false}};
}

TEST(zip_stream, extracts_zstd_entries_byte_for_byte_however_the_body_is_cut_into_pieces) {
  expect_whole_however_cut(zstd_entries());
}

TEST(zip_stream, a_zstd_entry_cut_short_or_damaged_at_any_byte_is_refused_naming_it) {
  spec_entry e{"pkg/mod.py", std::string(3000, 'm') + random_bytes(400, 10)};
  e.zstd = true;
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

// A zstd shard with its dictionary (docs/packing.md, "zstd shards"): the dictionary entry first, small files
// compressed with it, a large one in frames with its seek table, and a deflated one.
spec_entry dictionary_entry(std::string bytes) {
  spec_entry d{".ferry-zstd-dictionary", std::move(bytes), 0444};
  d.deflate = false;
  d.dictionary = true;
  return d;
}

spec_entry with_dictionary(std::string name, std::string data) {
  auto e = zstd(std::move(name), std::move(data));
  e.zstd_dict = true;
  return e;
}

unsigned dictionary_id(const std::string& dict) { return ZSTD_getDictID_fromDict(dict.data(), dict.size()); }

// The first frame's dictID, read by zstd from the entry's bytes: the test's zips really name the dictionary.
unsigned frame_dictionary_id(const std::string& zip, const zip_entry& e) {
  const auto start = e.local_offset + 30 + e.name.size();
  return ZSTD_getDictID_fromFrame(zip.data() + start, static_cast<std::size_t>(e.compressed));
}

std::vector<spec_entry> shard_with_dictionary(const std::string& dict) {
  std::vector<spec_entry> entries = {dictionary_entry(dict)};
  for (int i = 0; i < 6; ++i)
    entries.push_back(with_dictionary("pkg/mod" + std::to_string(i) + ".py", test_zip::sample_module(1, i)));
  entries.push_back(zstd("pkg/large.so", std::string(5 << 20, 'L') + random_bytes(70000, 11)));
  entries.push_back({"pkg/plain.txt", std::string(3000, 'p')});
  entries.push_back(with_dictionary("pkg/zz_empty.py", ""));
  return entries;
}

TEST(zip_stream, a_shard_with_a_dictionary_gives_its_files_byte_for_byte_and_never_the_dictionary) {
  const auto dict = test_zip::train_dictionary(1);
  const auto entries = shard_with_dictionary(dict);
  const auto zip = make_zip(entries);
  diagnostics diag;
  auto opened = open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  EXPECT_TRUE(opened->entries[0].dictionary);
  ASSERT_NE(dictionary_id(dict), 0u);
  EXPECT_EQ(frame_dictionary_id(zip, opened->entries[1]), dictionary_id(dict));
  for (std::size_t chunk : {std::size_t(1), std::size_t(13), std::size_t(4096), zip.size()}) {
    collector sink;
    diagnostics d;
    ASSERT_FALSE(read_zip(zip, chunk, sink, d)) << "chunk " << chunk << ": " << d.message;
    ASSERT_EQ(sink.entries.size(), entries.size() - 1);  // not the dictionary
    for (std::size_t i = 1; i < entries.size(); ++i) {
      EXPECT_EQ(sink.entries[i - 1].name, entries[i].name);
      EXPECT_EQ(sink.entries[i - 1].data, entries[i].data) << entries[i].name;
      EXPECT_TRUE(sink.entries[i - 1].ended);
    }
  }
}

TEST(zip_stream, a_frame_naming_another_dictionary_or_one_the_shard_lacks_is_refused_naming_both_ids) {
  const auto dict = test_zip::train_dictionary(1);
  const auto other = test_zip::train_dictionary(2);
  ASSERT_NE(dictionary_id(dict), dictionary_id(other));
  auto entries = shard_with_dictionary(dict);
  entries[0] = dictionary_entry(other);  // the shard's dictionary replaced by another trained one
  for (auto& e : entries) {
    if (e.zstd_dict) e.zstd_dict_bytes = dict;
  }
  collector sink;
  diagnostics diag;
  ASSERT_EQ(read_zip(make_zip(entries), 4096, sink, diag), make_error_code(errc::bad_zip));
  EXPECT_NE(diag.message.find(fmt::format("entry 'pkg/mod0.py' is compressed with zstd dictionary {}, the shard holds {}",
                                          dictionary_id(dict), dictionary_id(other))),
            std::string::npos)
      << diag.message;

  entries.erase(entries.begin());  // no dictionary at all
  collector none;
  diagnostics d;
  ASSERT_EQ(read_zip(make_zip(entries), 4096, none, d), make_error_code(errc::bad_zip));
  EXPECT_NE(d.message.find(fmt::format("entry 'pkg/mod0.py' is compressed with zstd dictionary {}, the shard holds none",
                                       dictionary_id(dict))),
            std::string::npos)
      << d.message;
  EXPECT_TRUE(none.entries.empty() || none.entries[0].data.empty());
}

TEST(zip_stream, a_dictionary_that_is_not_first_or_is_marked_in_one_header_only_is_refused) {
  const auto dict = test_zip::train_dictionary(1);
  auto second = shard_with_dictionary(dict);
  std::swap(second[0], second[1]);
  diagnostics diag;
  auto opened = open_zip(make_zip(second), diag);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error(), make_error_code(errc::bad_zip));
  EXPECT_EQ(diag.message, "the zstd dictionary '.ferry-zstd-dictionary' is not the zip's first entry");

  auto two = shard_with_dictionary(dict);
  two.insert(two.begin() + 2, dictionary_entry(dict));
  two[2].name = ".ferry-zstd-dictionary-2";
  diagnostics d2;
  ASSERT_FALSE(open_zip(make_zip(two), d2));
  EXPECT_EQ(d2.message, "the zstd dictionary '.ferry-zstd-dictionary-2' is not the zip's first entry");

  // The local header's extra field made another id: the central directory alone says "dictionary".
  auto zip = make_zip(shard_with_dictionary(dict));
  const std::string mark("\x66\x7a\x01\x00\x01", 5);
  const auto at = zip.find(mark);
  ASSERT_LT(at, zip.find("pkg/mod0.py"));
  zip[at] = 0x67;
  collector sink;
  diagnostics d3;
  ASSERT_EQ(read_zip(zip, 4096, sink, d3), make_error_code(errc::bad_zip));
  EXPECT_EQ(d3.message, "entry '.ferry-zstd-dictionary' is marked as the zstd dictionary in only one of its headers");
  EXPECT_TRUE(sink.entries.empty());
}

TEST(zip_stream, a_dictionary_entry_over_1_mib_or_not_a_dictionary_is_refused) {
  auto big = dictionary_entry(std::string((1 << 20) + 1, 'd'));
  diagnostics diag;
  ASSERT_FALSE(open_zip(make_zip({big}), diag));
  EXPECT_EQ(diag.message, "the zstd dictionary '.ferry-zstd-dictionary' is 1048577 bytes, over the 1048576 a node loads");
  collector sink;
  diagnostics d;
  ASSERT_EQ(read_zip(make_zip({dictionary_entry("not a dictionary"), zstd("a.py", "A = 1\n")}), 4096, sink, d),
            make_error_code(errc::bad_zip));
  EXPECT_EQ(d.message, "the zstd dictionary '.ferry-zstd-dictionary' is not one (no dictionary header)");
}

// A large entry's seek table, spoilt each way the writer never spoils it.
std::string large_zip(const std::string& table) {
  auto e = zstd("pkg/large.so", std::string(9 << 20, 'L') + random_bytes(5000, 12));
  e.zstd_table = table;
  return make_zip({e, {"after.txt", "after"}});
}

std::string refusal(const std::string& zip) {
  collector sink;
  diagnostics diag;
  const auto ec = read_zip(zip, 65536, sink, diag);
  EXPECT_EQ(ec, make_error_code(errc::bad_zip)) << diag.message;
  for (const auto& e : sink.entries) EXPECT_NE(e.name, "after.txt");
  return diag.message;
}

TEST(zip_stream, a_missing_truncated_or_disagreeing_zstd_seek_table_is_refused_naming_the_entry) {
  {
    collector sink;
    diagnostics diag;
    ASSERT_FALSE(read_zip(large_zip("auto"), 65536, sink, diag)) << diag.message;
    ASSERT_EQ(sink.entries.size(), 2u);
    EXPECT_EQ(sink.entries[0].data.size(), (9u << 20) + 5000);
  }
  EXPECT_EQ(refusal(large_zip("none")), "entry 'pkg/large.so' of 9442184 bytes has no zstd seek table after its 3 frames");
  EXPECT_EQ(refusal(large_zip("truncated")),
            "the zstd seek table of entry 'pkg/large.so' is truncated: the entry ends 30 bytes into its 33");
  const auto wrong = refusal(large_zip("wrong"));
  EXPECT_TRUE(wrong.starts_with("the zstd seek table of entry 'pkg/large.so' says frame 1 is 4194304 bytes from "))
      << wrong;
}

TEST(zip_stream, an_entry_of_at_most_4_mib_is_one_frame_and_a_larger_one_is_never_one_frame) {
  auto cut = zstd("pkg/small.py", std::string(3000, 's'));
  cut.zstd_frame = 1000;
  cut.zstd_table = "none";
  EXPECT_EQ(refusal(make_zip({cut, {"after.txt", "after"}})),
            "entry 'pkg/small.py' of 3000 bytes holds more than one zstd frame (only an entry over 4 MiB is cut into "
            "frames)");
  auto tabled = zstd("pkg/small.py", std::string(3000, 's'));
  tabled.zstd_table = "always";
  EXPECT_EQ(refusal(make_zip({tabled, {"after.txt", "after"}})),
            "entry 'pkg/small.py' of 3000 bytes has a zstd seek table (only an entry over 4 MiB is cut into frames)");
  auto whole = zstd("pkg/large.so", std::string((4 << 20) + 1, 'w'));
  whole.zstd_frame = 8 << 20;
  EXPECT_EQ(refusal(make_zip({whole, {"after.txt", "after"}})),
            "zstd frame 1 of entry 'pkg/large.so' holds 4194305 bytes, over the 4 MiB of a frame (an entry over 4 MiB "
            "is cut into frames, with a seek table)");
  auto uneven = zstd("pkg/large.so", std::string(6 << 20, 'u'));
  uneven.zstd_frame = 3 << 20;
  EXPECT_EQ(refusal(make_zip({uneven, {"after.txt", "after"}})),
            "zstd frame 1 of entry 'pkg/large.so' holds 3145728 bytes; only the last may hold less than 4 MiB");
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
