// The zstd layer writer (packaging/zip_zstd_backend.hpp, through zip_writer) against the readers of its
// zips: the node program's zip reader (names, bytes, modes, every entry's CRC and size), libarchive's bsdtar,
// the zstd command on an entry's raw data, libzstd with the shard's dictionary. Zip64 records are checked by
// the node program's directory parser with offsets and sizes past 4 GiB, without writing 4 GiB.
#include "agent/node/zip_stream.hpp"
#include "packaging/layer.hpp"
#include "packaging/layer_upload.hpp"
#include "packaging/zip_records.hpp"
#include "packaging/zip_writer.hpp"
#include "packaging/zip_zstd_backend.hpp"

#include "support/process.hpp"
#include "support/random_bytes.hpp"
#include "support/temp_dir.hpp"
#include "zip_fixture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

namespace ferry::agent::node {
namespace {

namespace fs = std::filesystem;
using packaging::file_entry;
using packaging::zip_codec;
using packaging::zip_options;
using packaging::zip_writer;
using packaging::zip_zstd_backend;
using test::temp_dir;

constexpr std::uint64_t frame = zip_zstd_backend::frame_size;

file_entry entry_for(const fs::path& root, const std::string& relative) {
  file_entry entry;
  entry.path = relative;
  entry.source = (root / relative).string();
  struct stat st {};
  if (::lstat(entry.source.c_str(), &st) != 0) throw std::runtime_error("lstat " + entry.source);
  if (S_ISLNK(st.st_mode)) {
    entry.type = file_entry::kind::symlink;
    entry.permissions = 0777;
    entry.link_target = fs::read_symlink(entry.source).native();
  } else {
    entry.permissions = st.st_mode & 07777;
  }
  entry.key = {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
               static_cast<std::uint64_t>(st.st_size),
               static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  return entry;
}

// Every regular file and symlink under root, sorted by path bytes, as a layer holds them.
std::vector<file_entry> entries_of(const fs::path& root) {
  std::vector<std::string> paths;
  for (const auto& item : fs::recursive_directory_iterator(root))
    if (item.is_symlink() || item.is_regular_file()) paths.push_back(item.path().lexically_relative(root).native());
  std::sort(paths.begin(), paths.end());
  std::vector<file_entry> entries;
  for (const auto& path : paths) entries.push_back(entry_for(root, path));
  return entries;
}

std::string zip_of(const std::vector<file_entry>& entries, const zip_options& options) {
  std::string bytes;
  zip_writer writer(options, [&](std::string_view piece) { bytes.append(piece); });
  diagnostics diag;
  for (const auto& entry : entries)
    if (auto added = writer.add(entry, diag); !added) throw std::runtime_error("add: " + diag.message);
  if (auto done = writer.finish(diag); !done) throw std::runtime_error("finish: " + diag.message);
  if (writer.bytes_out() != bytes.size()) throw std::runtime_error("bytes_out() disagrees with the sink");
  return bytes;
}

zip_options zstd_options(std::string dictionary = {}) {
  zip_options o;
  o.codec = zip_codec::zstd;
  o.dictionary = std::move(dictionary);
  return o;
}

// Text that compresses, but not to nothing: frames of a realistic size.
std::string compressible(std::size_t size, unsigned seed) {
  const auto words = test::random_bytes(4096, seed);
  std::string out;
  out.reserve(size);
  std::uint32_t state = seed;
  while (out.size() < size) {
    state = state * 1664525u + 1013904223u;
    out.append(words, (state >> 8) % 4000, 1 + (state >> 20) % 90);
  }
  out.resize(size);
  return out;
}

struct extracted {
  std::string data;
  std::uint32_t mode = 0;
  std::uint16_t method = 0;
  bool ended = false;
};

// What the node program extracts from a whole zip, by name.
class keeper final : public entry_sink {
 public:
  std::map<std::string, extracted> files;
  std::vector<std::string> order;
  result<void> begin(const zip_entry& e, diagnostics&) override {
    order.push_back(e.name);
    current_ = &files[e.name];
    current_->mode = e.mode;
    current_->method = e.method;
    return {};
  }
  result<void> data(std::string_view bytes, diagnostics&) override {
    current_->data.append(bytes);
    return {};
  }
  result<void> end(diagnostics&) override {
    current_->ended = true;
    return {};
  }

 private:
  extracted* current_ = nullptr;
};

keeper node_read(std::string_view zip, std::size_t chunk = 64 << 10) {
  diagnostics diag;
  auto opened = test_zip::open_zip(zip, diag);
  if (!opened) throw std::runtime_error("open: " + diag.message);
  keeper sink;
  zip_stream stream(opened->entries, opened->tail.directory_offset);
  const auto body = zip.substr(0, opened->tail.directory_offset);
  for (std::size_t at = 0; at < body.size(); at += chunk)
    if (auto r = stream.feed(body.substr(at, chunk), sink, diag); !r) throw std::runtime_error("feed: " + diag.message);
  if (auto r = stream.finish(diag); !r) throw std::runtime_error("finish: " + diag.message);
  return sink;
}

// An entry's raw (compressed) data, found through the central directory and its local header.
std::string raw_data(std::string_view zip, const std::string& name) {
  diagnostics diag;
  auto opened = test_zip::open_zip(zip, diag);
  if (!opened) throw std::runtime_error(diag.message);
  for (const auto& e : opened->entries) {
    if (e.name != name) continue;
    const auto header = zip.substr(e.local_offset, 30);
    const auto u16 = [&](std::size_t at) {
      return static_cast<std::size_t>(static_cast<unsigned char>(header[at]) |
                                      static_cast<unsigned char>(header[at + 1]) << 8);
    };
    return std::string(zip.substr(e.local_offset + 30 + u16(26) + u16(28), e.compressed));
  }
  throw std::runtime_error("no entry " + name);
}

std::uint32_t u32_at(std::string_view s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

// The frames a zstd entry's data holds, as zstd sees them: {compressed, decompressed} each, and whether a
// skippable frame (the seek table) ends it.
struct frame_walk {
  std::vector<std::pair<std::size_t, std::uint64_t>> frames;
  std::string skippable;  // the last skippable frame, whole
};

frame_walk walk_frames(std::string_view data) {
  frame_walk out;
  while (!data.empty()) {
    const auto size = ZSTD_findFrameCompressedSize(data.data(), data.size());
    if (ZSTD_isError(size)) throw std::runtime_error(std::string("not zstd frames: ") + ZSTD_getErrorName(size));
    if (data.size() >= 4 && (u32_at(data, 0) & 0xFFFFFFF0u) == 0x184D2A50u) {  // a skippable frame's magic
      out.skippable = std::string(data.substr(0, size));
    } else {
      out.frames.emplace_back(size, ZSTD_getFrameContentSize(data.data(), size));
    }
    data.remove_prefix(size);
  }
  return out;
}

class zstd_writer : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.write("pkg/__init__.py", "from .core import *\n");
    tree_.write("pkg/core.py", compressible(30000, 1));
    tree_.write("pkg/empty.txt", "");
    tree_.write("pkg/données/été.py", "NAME = 'été'\n");  // not ASCII: bit 11
    tree_.write("pkg/wheel.whl", test::random_bytes(7000, 2));
    fs::permissions(tree_.write("bin/tool", "#!/bin/sh\necho tool\n"), fs::perms(0755));
    fs::create_symlink("../pkg/core.py", tree_ / "bin/core-link");
    tree_.write("lib/exact.so", compressible(frame, 3));
    tree_.write("lib/one-more.so", compressible(frame + 1, 4));
    tree_.write("lib/big.so", compressible(20 << 20, 5));
  }

  temp_dir tree_;
};

TEST_F(zstd_writer, round_trips_through_the_node_reader_with_names_bytes_modes_and_symlinks) {
  const auto entries = entries_of(tree_.path());
  const auto zip = zip_of(entries, zstd_options());
  EXPECT_EQ(zip, zip_of(entries, zstd_options())) << "the same entries give the same zip bytes";

  const auto got = node_read(zip);
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.path);
  EXPECT_EQ(got.order, names) << "every entry, in the layer's order";
  for (const auto& e : entries) {
    SCOPED_TRACE(e.path);
    const auto& g = got.files.at(e.path);
    EXPECT_TRUE(g.ended);
    EXPECT_EQ(g.mode, e.mode());
    if (e.type == file_entry::kind::symlink) {
      EXPECT_EQ(g.data, e.link_target);
      EXPECT_EQ(g.method, 0);
    } else {
      EXPECT_EQ(g.data, test::read_file(e.source));
      const bool stored = e.key.size == 0 || e.path.ends_with(".whl");
      EXPECT_EQ(g.method, stored ? 0 : 93);
    }
  }
  EXPECT_EQ(got.files.at("bin/tool").mode, 0100755u);
  EXPECT_EQ(got.files.at("bin/core-link").mode, 0120777u);
}

TEST_F(zstd_writer, a_file_over_4_mib_is_independent_frames_of_4_mib_and_a_seek_table_and_no_more_is_one_frame) {
  const auto zip = zip_of(entries_of(tree_.path()), zstd_options());

  const auto exact = walk_frames(raw_data(zip, "lib/exact.so"));
  ASSERT_EQ(exact.frames.size(), 1u);
  EXPECT_EQ(exact.frames[0].second, frame) << "the content size is in the frame header";
  EXPECT_TRUE(exact.skippable.empty()) << "one frame: no seek table";

  for (const auto& [name, size] : {std::pair<std::string, std::uint64_t>{"lib/one-more.so", frame + 1},
                                   {"lib/big.so", 20 << 20}}) {
    SCOPED_TRACE(name);
    const auto walk = walk_frames(raw_data(zip, name));
    const auto n = (size + frame - 1) / frame;
    ASSERT_EQ(walk.frames.size(), n);
    for (std::size_t i = 0; i < n; ++i)
      EXPECT_EQ(walk.frames[i].second, i + 1 < n ? frame : size - (n - 1) * frame) << "frame " << i;
    // The seek table: magic, size, {compressed, decompressed} per frame, then n, descriptor 0, footer magic.
    const auto& t = walk.skippable;
    ASSERT_EQ(t.size(), 8 + 8 * n + 9);
    EXPECT_EQ(u32_at(t, 0), 0x184D2A5Eu);
    EXPECT_EQ(u32_at(t, 4), 8 * n + 9);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(u32_at(t, 8 + 8 * i), walk.frames[i].first) << "frame " << i;
      EXPECT_EQ(u32_at(t, 12 + 8 * i), walk.frames[i].second) << "frame " << i;
    }
    EXPECT_EQ(u32_at(t, 8 + 8 * n), n);
    EXPECT_EQ(t[12 + 8 * n], '\0');
    EXPECT_EQ(u32_at(t, 13 + 8 * n), 0x8F92EAB1u);
  }
}

TEST_F(zstd_writer, bsdtar_lists_and_extracts_a_zstd_layer_and_the_zstd_command_decodes_a_multi_frame_entry) {
  temp_dir out;
  const auto zip_path = out.write("layer.zstd.zip", zip_of(entries_of(tree_.path()), zstd_options()));

  const auto listed = test::run({"bsdtar", "-tf", zip_path.string()});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  for (const auto& e : entries_of(tree_.path()))
    EXPECT_NE(listed.out.find(e.path + "\n"), std::string::npos) << e.path << " in\n" << listed.out;

  // libarchive decodes method 93 itself, skipping the seek table's skippable frame.
  const auto big = test::run({"bsdtar", "-xOf", zip_path.string(), "lib/big.so"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_TRUE(big.out == test::read_file(tree_ / "lib/big.so")) << "bsdtar gives other bytes: " << big.out.size();

  const auto raw = out.write("big.zst", raw_data(test::read_file(zip_path), "lib/big.so"));
  const auto decoded = test::run({"zstd", "-q", "-d", "-c", raw.string()});
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_TRUE(decoded.out == test::read_file(tree_ / "lib/big.so")) << "zstd -d gives other bytes";
}

TEST_F(zstd_writer, reads_files_a_frame_at_a_time_in_parts_of_the_budget) {
  // add_some() returns once its budget went out, so a big file never waits whole in the caller's memory.
  const auto entries = entries_of(tree_.path());
  std::string bytes;
  std::size_t largest = 0;
  zip_writer writer(zstd_options(), [&](std::string_view piece) {
    largest = std::max(largest, piece.size());
    bytes.append(piece);
  });
  diagnostics diag;
  const auto& big = *std::find_if(entries.begin(), entries.end(), [](auto& e) { return e.path == "lib/big.so"; });
  int calls = 0;
  for (;;) {
    const auto in_before = writer.bytes_in(), out_before = writer.bytes_out();
    auto done = writer.add_some(big, 1 << 20, diag);
    ASSERT_TRUE(done) << diag.message;
    ++calls;
    // A part's worth of output and at most one read's compression beyond it, not the whole file.
    EXPECT_LE(writer.bytes_out() - out_before, (1 << 20) + ZSTD_compressBound(zip_writer::read_chunk)) << calls;
    EXPECT_LT(writer.bytes_in() - in_before, std::uint64_t{20} << 20) << "call " << calls;
    if (*done) break;
  }
  EXPECT_GT(calls, 2);
  EXPECT_LE(largest, zip_writer::output_block);
  ASSERT_TRUE(writer.finish(diag)) << diag.message;
  EXPECT_EQ(node_read(bytes).files.at("lib/big.so").data, test::read_file(tree_ / "lib/big.so"));
}

TEST_F(zstd_writer, a_dictionary_is_the_first_entry_marked_and_small_files_name_it_in_their_frames) {
  // A dictionary trained by the zstd command on small files like the layer's.
  temp_dir samples, out;
  std::vector<std::string> argv = {"zstd", "-q", "--train"};
  for (int i = 0; i < 200; ++i) {
    const auto name = "s" + std::to_string(i) + ".py";
    samples.write(name, "import os\nfrom pkg import core\n" + compressible(2000, 100 + i));
    argv.push_back((samples / name).string());
  }
  argv.insert(argv.end(), {"-o", (out / "dict").string()});
  const auto trained = test::run(argv);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const auto dictionary = test::read_file(out / "dict");
  const auto dict_id = ZSTD_getDictID_fromDict(dictionary.data(), dictionary.size());
  ASSERT_NE(dict_id, 0u);

  const auto entries = entries_of(tree_.path());
  const auto zip = zip_of(entries, zstd_options(dictionary));
  EXPECT_EQ(zip, zip_of(entries, zstd_options(dictionary))) << "deterministic with a dictionary too";

  diagnostics diag;
  auto opened = test_zip::open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  const auto& first = opened->entries.front();
  EXPECT_EQ(first.name, ".ferry-zstd-dictionary");
  EXPECT_EQ(first.method, 0);
  EXPECT_EQ(first.mode, 0100444u);
  EXPECT_EQ(raw_data(zip, first.name), dictionary);
  // The extra field 0x7a66 = 0x01, in the local header and in the central directory.
  const std::string marker("\x66\x7a\x01\x00\x01", 5);
  const auto local = zip.substr(0, 30 + first.name.size() + 5);
  EXPECT_EQ(local.substr(30 + first.name.size()), marker);
  const auto directory = zip.substr(opened->tail.directory_offset, 46 + first.name.size() + 5);
  EXPECT_EQ(directory.substr(46 + first.name.size()), marker);
  EXPECT_EQ(opened->entries.size(), entries.size() + 1);

  auto* dctx = ZSTD_createDCtx();
  for (const auto& e : entries) {
    if (e.type != file_entry::kind::regular || e.key.size == 0 || e.path.ends_with(".whl")) continue;
    SCOPED_TRACE(e.path);
    const auto raw = raw_data(zip, e.path);
    const bool small = e.key.size < packaging::dictionary_file_limit;
    EXPECT_EQ(ZSTD_getDictID_fromFrame(raw.data(), raw.size()), small ? dict_id : 0u);
    if (!small) continue;
    std::string content(e.key.size, '\0');
    const auto n = ZSTD_decompress_usingDict(dctx, content.data(), content.size(), raw.data(), raw.size(),
                                             dictionary.data(), dictionary.size());
    ASSERT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
    EXPECT_EQ(content, test::read_file(e.source));
  }
  ZSTD_freeDCtx(dctx);
}

// What `ferry pack` stores: the shard's zip made by the upload's part maker, which trains the shard's
// dictionary from its small files before the first byte. The node program reads it back whole, and leaves
// the dictionary out of the files.
TEST(zstd_shard, a_zipped_shard_carries_the_dictionary_trained_on_its_small_files) {
  temp_dir tree;
  for (int i = 0; i < 120; ++i)
    tree.write("pkg/m" + std::to_string(1000 + i) + ".py", "import os\nfrom pkg import core\n" + compressible(3000, 300 + i));
  tree.write("pkg/big.bin", compressible(5 << 20, 7));
  packaging::layer l;
  l.files = entries_of(tree.path());
  for (auto& f : l.files) f.digest = net::sha256(test::read_file(f.source));
  packaging::seal_layer(l, 1ull << 30);
  ASSERT_EQ(l.shards.size(), 1u);
  const auto options = zstd_options();  // named: the coroutine keeps a reference to it
  auto zip_now = [&] {
    boost::asio::io_context io;
    net::cpu_pool pool(2);
    std::string zip;
    diagnostics diag;
    auto done = boost::asio::co_spawn(
        io, packaging::zip_shard(pool, l, l.shards[0], options, 1 << 20,
                                 [&](std::vector<char>&& part) { zip.append(part.data(), part.size()); }, diag),
        boost::asio::use_future);
    io.run();
    EXPECT_TRUE(done.get()) << diag.message;
    return zip;
  };
  const auto zip = zip_now();
  EXPECT_EQ(zip, zip_now()) << "the dictionary is trained deterministically";
  diagnostics diag;
  auto opened = test_zip::open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  EXPECT_EQ(opened->entries.front().name, ".ferry-zstd-dictionary");
  EXPECT_EQ(opened->entries.size(), l.files.size() + 1);
  const auto read = node_read(zip);
  EXPECT_EQ(read.files.size(), l.files.size()) << "the dictionary is no file of the layer";
  for (const auto& f : l.files) EXPECT_EQ(read.files.at(f.path).data, test::read_file(f.source)) << f.path;
}

// Counts what the node program extracts, without keeping it.
class counter final : public entry_sink {
 public:
  std::map<std::string, std::uint64_t> sizes;
  result<void> begin(const zip_entry& e, diagnostics&) override {
    current_ = &sizes[e.name];
    return {};
  }
  result<void> data(std::string_view bytes, diagnostics&) override {
    *current_ += bytes.size();
    return {};
  }
  result<void> end(diagnostics&) override { return {}; }

 private:
  std::uint64_t* current_ = nullptr;
};

// Opt-in: it reads 4.5 GB of holes, compresses and decompresses them (about 15 s on a 2-core machine).
// Offsets past 4 GiB (which zeros never reach) are zip_records' test below.
TEST(zstd_writer_zip64, a_file_over_4_gib_uses_zip64_and_reads_back) {
  if (!std::getenv("FERRY_ZIP64_TEST")) GTEST_SKIP() << "set FERRY_ZIP64_TEST=1 to zip a sparse 4.5 GB file";
  temp_dir tree;
  constexpr std::uint64_t size = 4'500'000'000;
  std::ofstream(tree / "a-zeros.bin").close();
  fs::resize_file(tree / "a-zeros.bin", size);
  tree.write("b-after.txt", "an entry after 4 GiB of input\n");
  const auto zip = zip_of(entries_of(tree.path()), zstd_options());  // zeros: a few hundred KB

  diagnostics diag;
  auto opened = test_zip::open_zip(zip, diag);
  ASSERT_TRUE(opened) << diag.message;
  ASSERT_EQ(opened->entries.size(), 2u);
  EXPECT_EQ(opened->entries[0].size, size) << "from the Zip64 extra";
  EXPECT_EQ(u32_at(zip, 18), 0xFFFFFFFFu) << "the local header's sizes are in its Zip64 extra";
  const auto walk = walk_frames(raw_data(zip, "a-zeros.bin"));
  EXPECT_EQ(walk.frames.size(), (size + frame - 1) / frame);

  counter sink;
  zip_stream stream(opened->entries, opened->tail.directory_offset);
  const auto body = std::string_view(zip).substr(0, opened->tail.directory_offset);
  for (std::size_t at = 0; at < body.size(); at += 1 << 20)
    ASSERT_TRUE(stream.feed(body.substr(at, 1 << 20), sink, diag)) << diag.message;
  ASSERT_TRUE(stream.finish(diag)) << diag.message;
  EXPECT_EQ(sink.sizes.at("a-zeros.bin"), size) << "and its CRC-32 checked";
  EXPECT_EQ(sink.sizes.at("b-after.txt"), 30u);

  temp_dir out;
  const auto listed = test::run({"bsdtar", "-tvf", out.write("zip64.zstd.zip", zip).string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("4500000000"), std::string::npos) << listed.out;
}

// The zip reader's fuzzer (tests/fuzz/fuzz_zip.cpp) starts from a zip this writer makes: zstd entries, one
// of two frames and a seek table, a stored symlink and empty file. Its input is a byte choosing the piece
// size, then the zip. FERRY_WRITE_FUZZ_SEED=1 writes it again after a deliberate change of the format.
TEST(zstd_writer_seed, the_fuzzers_seed_is_what_the_writer_makes_today) {
  temp_dir tree;
  tree.write("pkg/__init__.py", "from .core import run\n");
  tree.write("pkg/core.py", "def run():\n    return 'zstd'\n");
  tree.write("pkg/empty.txt", "");
  std::string big;
  while (big.size() < frame + 100) big += "a line that repeats, so that two frames stay small\n";
  big.resize(frame + 100);
  tree.write("pkg/big.txt", big);
  fs::create_symlink("core.py", tree / "pkg/link.py");
  const auto seed = "\x05" + zip_of(entries_of(tree.path()), zstd_options());
  ASSERT_EQ(walk_frames(raw_data(seed.substr(1), "pkg/big.txt")).frames.size(), 2u);
  EXPECT_EQ(node_read(seed.substr(1), 37).files.at("pkg/big.txt").data, big) << "the reader takes it whole";

  const fs::path corpus = FERRY_SOURCE_DIR "/tests/fuzz/corpus/zip";
  temp_dir scratch;
  const auto sum = test::run({"sha1sum", scratch.write("seed", seed).string()});
  ASSERT_EQ(sum.exit_code, 0) << sum.err;
  const auto path = corpus / sum.out.substr(0, 40);
  if (std::getenv("FERRY_WRITE_FUZZ_SEED")) std::ofstream(path, std::ios::binary) << seed;
  ASSERT_TRUE(fs::exists(path)) << path << ": the writer's output changed; FERRY_WRITE_FUZZ_SEED=1 writes the new seed";
  EXPECT_TRUE(test::read_file(path) == seed);
}

// Sizes and offsets past 4 GiB go in Zip64 records that the node program's directory parser reads back.
TEST(zip_records, sizes_and_offsets_past_4_gib_are_read_back_from_zip64_records) {
  using packaging::zip_records::entry;
  constexpr std::uint64_t gib = 1ull << 30;
  entry big;
  big.name = "big.so";
  big.method = 93;
  big.flags = packaging::zip_records::flag_descriptor;
  big.mode = 0100644;
  big.crc = 0x12345678;
  big.size = 5 * gib;
  big.compressed = 4 * gib + 7;
  big.offset = 0;
  big.zip64_local = true;
  entry after;
  after.name = "after.py";
  after.method = 93;
  after.mode = 0100600;
  after.size = 10;
  after.compressed = 12;
  after.offset = 4 * gib + 500;

  std::string local;
  packaging::zip_records::append_local_header(local, big);
  ASSERT_EQ(local.size(), 30 + big.name.size() + 20);
  EXPECT_EQ(u32_at(local, 18), 0xFFFFFFFFu) << "sizes in the Zip64 extra";
  EXPECT_EQ(u32_at(local, 22), 0xFFFFFFFFu);
  std::string descriptor;
  packaging::zip_records::append_data_descriptor(descriptor, big);
  EXPECT_EQ(descriptor.size(), 24u) << "8-byte sizes after a Zip64 local header";

  std::string directory;
  packaging::zip_records::append_central_header(directory, big);
  packaging::zip_records::append_central_header(directory, after);
  const std::uint64_t directory_offset = 6 * gib;
  std::string tail = directory;
  packaging::zip_records::append_end_records(tail, 2, directory_offset, directory.size());
  const auto zip_size = directory_offset + tail.size();

  diagnostics diag;
  auto parsed_tail = parse_tail(tail, zip_size, diag);
  ASSERT_TRUE(parsed_tail) << diag.message;
  EXPECT_EQ(parsed_tail->directory_offset, directory_offset) << "past 4 GiB: from the Zip64 end record";
  EXPECT_EQ(parsed_tail->entries, 2u);
  auto parsed = parse_directory(directory, *parsed_tail, diag);
  ASSERT_TRUE(parsed) << diag.message;
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].name, "big.so");
  EXPECT_EQ((*parsed)[0].size, 5 * gib);
  EXPECT_EQ((*parsed)[0].compressed, 4 * gib + 7);
  EXPECT_EQ((*parsed)[0].crc32, 0x12345678u);
  EXPECT_EQ((*parsed)[0].method, 93);
  EXPECT_EQ((*parsed)[1].name, "after.py");
  EXPECT_EQ((*parsed)[1].local_offset, 4 * gib + 500);
  EXPECT_EQ((*parsed)[1].size, 10u);
  EXPECT_EQ((*parsed)[1].mode, 0100600u);
}

}  // namespace
}  // namespace ferry::agent::node
