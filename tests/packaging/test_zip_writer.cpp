// zip_writer against the readers that will open its zips: Info-ZIP's unzip and Python's zipfile. Every zip
// a test makes is also checked with `unzip -t` and ZipFile.testzip().
#include "packaging/error.hpp"
#include "packaging/zip_writer.hpp"

#include "net/digest.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <clocale>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
using test::temp_dir;

// ---- building entries the way the walker does --------------------------------------------------------

file_key key_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// An entry for `relative` under `root`; symlinks stay symlinks. `source` overrides where the bytes come from.
file_entry entry_for(const fs::path& root, const std::string& relative, std::optional<fs::path> source = {}) {
  file_entry entry;
  entry.path = relative;
  entry.source = (source ? *source : root / relative).string();
  struct stat st {};
  if (::lstat(entry.source.c_str(), &st) != 0) throw std::runtime_error("lstat " + entry.source);
  if (S_ISLNK(st.st_mode) && !source) {
    entry.type = file_entry::kind::symlink;
    entry.permissions = 0777;
    entry.link_target = fs::read_symlink(entry.source).native();
  } else {
    if (::stat(entry.source.c_str(), &st) != 0) throw std::runtime_error("stat " + entry.source);
    entry.permissions = st.st_mode & 07777;
  }
  entry.key = key_of(st);
  return entry;
}

// Every regular file and symlink under root, sorted by path bytes, as the caller hands them over.
std::vector<file_entry> entries_of(const fs::path& root) {
  std::vector<std::string> paths;
  for (const auto& item : fs::recursive_directory_iterator(root)) {
    if (item.is_symlink() || item.is_regular_file()) paths.push_back(item.path().lexically_relative(root).native());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<file_entry> entries;
  for (const auto& path : paths) entries.push_back(entry_for(root, path));
  return entries;
}

std::string zip_of(const std::vector<file_entry>& entries, zip_options options = {}) {
  std::string bytes;
  zip_writer writer(options, [&](std::string_view piece) { bytes.append(piece); });
  diagnostics diag;
  for (const auto& entry : entries) {
    if (auto added = writer.add(entry, diag); !added) throw std::runtime_error("add: " + diag.message);
  }
  if (auto done = writer.finish(diag); !done) throw std::runtime_error("finish: " + diag.message);
  if (writer.bytes_out() != bytes.size()) throw std::runtime_error("bytes_out() disagrees with the sink");
  return bytes;
}

// Where two zips first differ ("" when they are equal): printing whole zips helps nobody.
std::string difference(const std::string& a, const std::string& b) {
  if (a == b) return "";
  const auto at = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
  return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) + ", first difference at byte " +
         std::to_string(at);
}

fs::path save(const temp_dir& dir, const std::string& name, const std::string& bytes) {
  return dir.write(name, bytes);
}

void make_file(const temp_dir& dir, const std::string& name, const std::string& content, fs::perms mode) {
  fs::permissions(dir.write(name, content), mode);
}

// ---- what the readers make of a zip -------------------------------------------------------------------

struct zip_info {
  std::string name;  // the raw bytes: UTF-8 when flagged, else the cp437 bytes Python decoded
  unsigned flags = 0;
  unsigned method = 0;
  unsigned mode = 0;  // external_attr >> 16
  std::uint64_t size = 0;
  std::uint64_t compressed = 0;
  std::string date;   // YYYYMMDDhhmmss from the DOS fields
  std::string extra;  // central directory extra fields, hex
  std::string sha256;
};

constexpr const char* inspect_script = R"(
import hashlib, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
print("testzip", z.testzip())
for i in z.infolist():
    raw = i.filename.encode("utf-8" if i.flag_bits & 0x800 else "cp437")
    print(raw.hex(), i.flag_bits, i.compress_type, i.external_attr >> 16, i.file_size, i.compress_size,
          "%04d%02d%02d%02d%02d%02d" % i.date_time, i.extra.hex() or "-", hashlib.sha256(z.read(i)).hexdigest())
)";

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Python's view of every entry; fails the test unless testzip() found every CRC right.
std::vector<zip_info> python_view(const fs::path& zip) {
  const auto r = test::run({test::system_python, "-c", inspect_script, zip.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string word, verdict;
  lines >> word >> verdict;
  EXPECT_EQ(word + " " + verdict, "testzip None") << r.out << r.err;
  std::vector<zip_info> infos;
  zip_info info;
  std::string name;
  while (lines >> name >> info.flags >> info.method >> info.mode >> info.size >> info.compressed >> info.date >>
         info.extra >> info.sha256) {
    info.name = unhex(name);
    infos.push_back(info);
  }
  return infos;
}

void expect_unzip_accepts(const fs::path& zip) {
  const auto r = test::run({"unzip", "-t", "-qq", zip.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// unzip runs in a UTF-8 locale: how *it* shows names is not what is under test.
void unzip_into(const fs::path& zip, const fs::path& dir) {
  test::process_options options;
  options.env = {{"LC_ALL", "C.UTF-8"}};
  const auto r = test::run({"unzip", "-q", "-o", zip.string(), "-d", dir.string()}, options);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
}

void python_extract_into(const fs::path& zip, const fs::path& dir) {
  const auto r = test::run({test::system_python, "-c",
                            "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])",
                            zip.string(), dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// "f 644 <content>" or "l 777 <target>" for every file and symlink under root, keyed by raw relative path.
std::map<std::string, std::string> listing(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& item : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    ::lstat(item.path().c_str(), &st);
    const auto relative = item.path().lexically_relative(root).native();
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", st.st_mode & 07777);
    if (S_ISLNK(st.st_mode)) out[relative] = std::string("l ") + mode + " " + fs::read_symlink(item.path()).native();
    if (S_ISREG(st.st_mode)) out[relative] = std::string("f ") + mode + " " + test::read_file(item.path());
  }
  return out;
}

const zip_info* find(const std::vector<zip_info>& infos, const std::string& name) {
  const auto it = std::find_if(infos.begin(), infos.end(), [&](const zip_info& i) { return i.name == name; });
  return it == infos.end() ? nullptr : &*it;
}

// A tree with the modes, kinds and sizes a site-packages has.
void make_project(const temp_dir& dir) {
  using fs::perms;
  make_file(dir, "pkg/__init__.py", "", perms(0644));
  make_file(dir, "pkg/core.py", std::string(5000, 'x') + "\nimport os\n", perms(0644));
  make_file(dir, "pkg/secret.cfg", "token = 1\n", perms(0600));
  make_file(dir, "bin/tool", "#!/bin/sh\necho hi\n", perms(0755));
  make_file(dir, "bin/private-tool", "#!/bin/sh\n", perms(0700));
  make_file(dir, "data/read-only.txt", "frozen\n", perms(0444));
  make_file(dir, "data/blob.whl", "PK not really a wheel", perms(0644));
  fs::create_symlink("core.py", dir / "pkg/alias.py");
  fs::create_symlink("../missing/target", dir / "pkg/dangling");
}

// ---- the tests ------------------------------------------------------------------------------------------

TEST(zip_writer, contents_modes_and_symlinks_survive_unzip_and_python) {
  temp_dir tree, out;
  make_project(tree);
  const auto entries = entries_of(tree.path());
  ASSERT_EQ(entries.size(), 9u);
  const auto zip = save(out, "p.zip", zip_of(entries));
  expect_unzip_accepts(zip);

  // unzip restores everything: bytes, permission bits, symlinks.
  unzip_into(zip, out / "unzip");
  EXPECT_EQ(listing(out / "unzip"), listing(tree.path()));
  EXPECT_TRUE(fs::is_symlink(out / "unzip/pkg/alias.py"));

  // Python's zipfile reads the same modes (it does not apply them) and the same bytes.
  const auto infos = python_view(zip);
  ASSERT_EQ(infos.size(), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    SCOPED_TRACE(entries[i].path);
    EXPECT_EQ(infos[i].name, entries[i].path);  // in the order given
    EXPECT_EQ(infos[i].mode, entries[i].mode());
    const auto content = entries[i].type == file_entry::kind::symlink ? entries[i].link_target
                                                                      : test::read_file(entries[i].source);
    EXPECT_EQ(infos[i].sha256, net::hex_sha256(content));
    EXPECT_EQ(infos[i].size, content.size());
  }
  python_extract_into(zip, out / "python");
  EXPECT_EQ(test::read_file(out / "python/pkg/core.py"), test::read_file(tree / "pkg/core.py"));
  EXPECT_EQ(test::read_file(out / "python/pkg/alias.py"), "core.py");  // zipfile writes links as files
}

TEST(zip_writer, the_same_files_give_the_same_bytes_whatever_their_directory_times_and_owners) {
  temp_dir source, a, b, out;
  make_project(source);
  const auto tree_a = a / "first";
  const auto tree_b = b / "a-second-tree-with-a-longer-name";
  fs::copy(source.path(), tree_a, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::copy(source.path(), tree_b, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const timespec old_times[2] = {{1'000'000'000, 123}, {1'000'000'000, 456}};  // 2001
  for (const auto& item : fs::recursive_directory_iterator(tree_b)) {
    ASSERT_EQ(::utimensat(AT_FDCWD, item.path().c_str(), old_times, AT_SYMLINK_NOFOLLOW), 0);
    ASSERT_EQ(::lchown(item.path().c_str(), 12345, 54321), 0);
  }
  const auto entries_a = entries_of(tree_a);
  const auto entries_b = entries_of(tree_b);
  ASSERT_NE(entries_a[0].key.mtime_ns, entries_b[0].key.mtime_ns);
  ASSERT_NE(entries_a[0].key.inode, entries_b[0].key.inode);

  const auto zip_a = zip_of(entries_a);
  EXPECT_EQ(difference(zip_a, zip_of(entries_b)), "");

  // Fixed DOS time, a "UT" field with no time in it, a "ux" field with uid 0 and gid 0: nothing else.
  const auto infos = python_view(save(out, "a.zip", zip_a));
  ASSERT_EQ(infos.size(), entries_a.size());
  for (const auto& info : infos) {
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.date, "19800101000000");
    EXPECT_EQ(info.extra, "555401000075780b000104000000000400000000");
  }
}

// Flips the process time zone and locale for one scope; the writer must not notice either.
class process_setting {
 public:
  process_setting(const char* tz, const char* locale)
      : tz_(std::getenv("TZ") ? std::optional<std::string>(std::getenv("TZ")) : std::nullopt),
        locale_(std::setlocale(LC_ALL, nullptr)) {
    ::setenv("TZ", tz, 1);
    ::tzset();
    if (!std::setlocale(LC_ALL, locale)) throw std::runtime_error(std::string("no locale ") + locale);
  }
  ~process_setting() {
    if (tz_) {
      ::setenv("TZ", tz_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
    std::setlocale(LC_ALL, locale_.c_str());
  }

 private:
  std::optional<std::string> tz_;
  std::string locale_;
};

TEST(zip_writer, the_bytes_do_not_depend_on_time_zone_or_locale) {
  temp_dir tree;
  make_project(tree);
  tree.write("caf\xe9.txt", "latin-1 name\n");
  tree.write("na\xc3\xafve/\xc3\x9f.py", "utf-8 name\n");
  const auto entries = entries_of(tree.path());
  std::string east, west;
  {
    const process_setting setting("XST-14", "C.UTF-8");  // UTC+14, where 1970 is furthest into the day
    east = zip_of(entries);
  }
  {
    const process_setting setting("YST+12", "C");  // UTC-12
    west = zip_of(entries);
  }
  EXPECT_EQ(difference(east, west), "");
}

// The UTF-8 flag is steered with uselocale(), which is per thread: writers on a pool must not disturb
// each other (nor the process locale).
TEST(zip_writer, writers_on_several_threads_give_the_same_bytes) {
  temp_dir tree;
  tree.write("caf\xe9.txt", "latin-1 name\n");
  tree.write("na\xc3\xafve/\xc3\x9f.py", "utf-8 name\n");
  tree.write("plain.py", std::string(100000, 'p'));
  const auto entries = entries_of(tree.path());
  const auto expected = zip_of(entries);
  const std::string process_locale = std::setlocale(LC_ALL, nullptr);
  std::array<std::string, 4> mismatches;
  {
    std::vector<std::jthread> threads;
    for (std::size_t t = 0; t < mismatches.size(); ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 50; ++round) {
          if (const auto d = difference(zip_of(entries), expected); !d.empty()) mismatches[t] = d;
        }
      });
    }
  }
  for (const auto& mismatch : mismatches) EXPECT_EQ(mismatch, "");
  EXPECT_EQ(std::setlocale(LC_ALL, nullptr), process_locale);
}

TEST(zip_writer, using_a_finished_writer_is_a_bug) {
  zip_writer writer({}, [](std::string_view) {});
  diagnostics diag;
  ASSERT_TRUE(writer.finish(diag));
  EXPECT_THROW((void)writer.finish(diag), std::logic_error);
  temp_dir tree;
  tree.write("late.py", "x\n");
  EXPECT_THROW((void)writer.add(entries_of(tree.path()).at(0), diag), std::logic_error);
}

TEST(zip_writer, names_keep_their_bytes_and_only_utf8_names_get_the_utf8_flag) {
  temp_dir tree, out;
  const std::string latin1 = "caf\xe9.txt";
  const std::string utf8_dir = "na\xc3\xafve";
  const std::string utf8 = utf8_dir + "/\xc3\x9f.py";
  tree.write(latin1, "latin-1 name\n");
  tree.write(utf8, "utf-8 name\n");
  tree.write("plain.txt", "ascii name\n");
  const auto entries = entries_of(tree.path());

  for (const char* locale : {"C", "C.UTF-8"}) {
    SCOPED_TRACE(locale);
    std::string bytes;
    {
      const process_setting setting("UTC", locale);
      bytes = zip_of(entries);
    }
    const auto zip = save(out, std::string(locale) + ".zip", bytes);
    expect_unzip_accepts(zip);
    const auto infos = python_view(zip);
    ASSERT_EQ(infos.size(), 3u);
    ASSERT_TRUE(find(infos, latin1) && find(infos, utf8) && find(infos, "plain.txt"));
    EXPECT_EQ(find(infos, utf8)->flags & 0x800, 0x800u);
    EXPECT_EQ(find(infos, latin1)->flags & 0x800, 0u);
    EXPECT_EQ(find(infos, "plain.txt")->flags & 0x800, 0u);

    const auto unzipped = out / (std::string("unzip-") + locale);
    unzip_into(zip, unzipped);
    EXPECT_EQ(listing(unzipped), listing(tree.path()));

    // Python decodes unflagged names as cp437, so only the UTF-8 name can come back as the same bytes.
    const auto extracted = out / (std::string("python-") + locale);
    python_extract_into(zip, extracted);
    EXPECT_EQ(test::read_file(extracted / utf8), "utf-8 name\n");
  }
}

TEST(zip_writer, deflates_at_the_configured_level_and_level_0_stores_everything) {
  temp_dir tree, out;
  // Text with enough variety that level 9 finds matches level 1 gives up on.
  std::mt19937 random(7);
  std::string text;
  const std::array<std::string_view, 8> words = {"import", "self", "return", "def", "value", "None", "(x)", "\n    "};
  while (text.size() < 1 << 20) {
    text += words[random() % words.size()];
    text += std::to_string(random() % 100);
  }
  tree.write("module.py", text);
  tree.write("other.py", text.substr(1000, 50000));
  const auto entries = entries_of(tree.path());

  std::map<int, std::uint64_t> compressed;
  for (int level : {0, 1, 9}) {
    SCOPED_TRACE(level);
    const auto zip = save(out, std::to_string(level) + ".zip", zip_of(entries, {.level = level}));
    expect_unzip_accepts(zip);
    const auto infos = python_view(zip);
    ASSERT_EQ(infos.size(), 2u);
    for (const auto& info : infos) EXPECT_EQ(info.method, level == 0 ? 0u : 8u) << info.name;
    EXPECT_EQ(infos[0].size, text.size());
    EXPECT_EQ(infos[0].sha256, net::hex_sha256(text));
    compressed[level] = infos[0].compressed;
  }
  EXPECT_EQ(compressed[0], text.size());
  EXPECT_LT(compressed[1], text.size() / 2);
  EXPECT_LT(compressed[9], compressed[1]);
}

TEST(zip_writer, already_compressed_and_empty_files_are_stored) {
  temp_dir tree, out;
  const std::string compressible(20000, 'a');
  for (const char* name : {"a.whl", "b.PNG", "c.tar.gz", "d.npz", "e.py", "f.tar.gz.py"}) {
    tree.write(name, compressible);
  }
  tree.write("empty.py", "");
  const auto zip = save(out, "z.zip", zip_of(entries_of(tree.path())));
  expect_unzip_accepts(zip);
  const auto infos = python_view(zip);
  ASSERT_EQ(infos.size(), 7u);
  for (const auto& info : infos) {
    SCOPED_TRACE(info.name);
    const bool stored = info.name != "e.py" && info.name != "f.tar.gz.py";
    EXPECT_EQ(info.method, stored ? 0u : 8u);
    EXPECT_EQ(info.sha256, net::hex_sha256(info.name == "empty.py" ? "" : compressible));
  }
  EXPECT_EQ(find(infos, "empty.py")->compressed, 0u);
}

TEST(zip_already_compressed, knows_compressed_formats_by_extension) {
  for (const char* name : {"x.zip", "x.gz", "a/b.tar.gz", "x.bz2", "x.xz", "x.zst", "torch-2.whl", "x.jar",
                           "img.png", "img.JPG", "img.jpeg", "x.gif", "x.webp", "x.mp3", "x.mp4", "w.npz", "x.7z",
                           "x.tgz", "font.woff2"}) {
    EXPECT_TRUE(already_compressed(name)) << name;
  }
  for (const char* name : {"x.py", "x.pyc", "x.so", "x.txt", "gz", "x.gz/", "x.gz/inner.py", "dir.png/README",
                           ".png.py", "x.", "", "x.zipper", "x.npy"}) {
    EXPECT_FALSE(already_compressed(name)) << name;
  }
}

// The VmHWM/VmRSS lines of /proc/self/status, in KiB.
std::uint64_t status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  }
  throw std::runtime_error("no " + field);
}

TEST(zip_writer, streams_a_large_file_through_bounded_memory) {
  temp_dir tree, out;
  constexpr std::size_t size = 50 << 20;
  {
    std::ofstream file(tree / "big.bin", std::ios::binary);
    std::mt19937_64 random(42);
    std::vector<std::uint64_t> chunk(1 << 17);  // 1 MiB of noise at a time: deflate cannot shrink it
    for (std::size_t written = 0; written < size; written += chunk.size() * 8) {
      for (auto& word : chunk) word = random();
      file.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size() * 8));
    }
  }
  const auto entries = entries_of(tree.path());
  const auto zip = out / "big.zip";
  std::ofstream file(zip, std::ios::binary);
  std::size_t calls = 0, largest = 0;

  // Forget the peak so far ("5" resets VmHWM), so the peak below is what the writer and add() used.
  std::ofstream("/proc/self/clear_refs") << "5";
  const auto rss_before = status_kib("VmRSS");
  zip_writer writer({}, [&](std::string_view piece) {
    ++calls;
    largest = std::max(largest, piece.size());
    file.write(piece.data(), static_cast<std::streamsize>(piece.size()));
  });
  diagnostics diag;
  ASSERT_TRUE(writer.add(entries.at(0), diag)) << diag.message;
  const auto peak = status_kib("VmHWM");
  EXPECT_LT(peak - rss_before, 16u << 10) << "KiB: the writer must not hold the file in memory";
  EXPECT_GT(writer.bytes_out(), size - zip_writer::output_block) << "the sink sees bytes before finish()";
  EXPECT_GT(calls, 100u);
  EXPECT_LE(largest, zip_writer::output_block);

  ASSERT_TRUE(writer.finish(diag)) << diag.message;
  file.close();
  expect_unzip_accepts(zip);
  const auto infos = python_view(zip);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].size, size);
  EXPECT_EQ(infos[0].sha256, net::hex_sha256(test::read_file(tree / "big.bin")));
}

// Opt-in: it reads 4.4 GB of holes and deflates them, about 18 s on a 2-core machine.
TEST(zip_writer, files_over_4_gib_use_zip64) {
  if (!std::getenv("FERRY_ZIP64_TEST")) GTEST_SKIP() << "set FERRY_ZIP64_TEST=1 to zip a sparse 4.4 GB file";
  temp_dir tree, out;
  constexpr std::uint64_t size = 4'400'000'000;  // a sparse file: reading its holes costs no disk
  {
    std::ofstream(tree / "zeros.bin").close();
    fs::resize_file(tree / "zeros.bin", size);
  }
  tree.write("after.txt", "an entry past 4 GiB of input\n");
  const auto zip = out / "zip64.zip";
  {
    std::ofstream file(zip, std::ios::binary);
    zip_writer writer({}, [&](std::string_view piece) {
      file.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    });
    diagnostics diag;
    for (const auto& entry : entries_of(tree.path())) ASSERT_TRUE(writer.add(entry, diag)) << diag.message;
    ASSERT_TRUE(writer.finish(diag)) << diag.message;
  }
  // Python reads sizes from the Zip64 extra field; `unzip -l` lists without inflating 4 GiB again.
  const auto r = test::run({test::system_python, "-c",
                            "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
                            "print(*[(i.filename, i.file_size) for i in z.infolist()]); print(z.read('after.txt'))",
                            zip.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "('after.txt', 29) ('zeros.bin', 4400000000)\nb'an entry past 4 GiB of input\\n'\n");
  const auto listed = test::run({"unzip", "-l", zip.string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_NE(listed.out.find("4400000000"), std::string::npos) << listed.out;
}

// ---- failures -------------------------------------------------------------------------------------------

struct failure {
  error_code code;
  std::string message;
};

// Adds `entry` after a good one; returns how it failed, or nullopt when it did not.
std::optional<failure> add_fails(const file_entry& entry) {
  temp_dir good;
  good.write("good.py", "ok\n");
  zip_writer writer({}, [](std::string_view) {});
  diagnostics diag;
  if (!writer.add(entry_for(good.path(), "good.py"), diag)) throw std::runtime_error(diag.message);
  const auto added = writer.add(entry, diag);
  if (added) return std::nullopt;
  failure f{added.error(), diag.message};
  // The archive is now unusable, and says so with the same error.
  diagnostics later;
  const auto finished = writer.finish(later);
  EXPECT_FALSE(finished);
  if (!finished) {
    EXPECT_EQ(finished.error(), added.error());
  }
  EXPECT_EQ(later.message, diag.message);
  return f;
}

TEST(zip_writer, a_file_deleted_after_hashing_is_file_changed) {
  temp_dir tree;
  tree.write("gone.py", "soon gone\n");
  const auto entry = entry_for(tree.path(), "gone.py");
  fs::remove(tree / "gone.py");
  const auto f = add_fails(entry);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::file_changed));
  EXPECT_NE(f->message.find("gone.py"), std::string::npos) << f->message;
}

TEST(zip_writer, a_file_rewritten_with_another_size_is_file_changed) {
  temp_dir tree;
  tree.write("grown.py", "short\n");
  const auto entry = entry_for(tree.path(), "grown.py");
  tree.write("grown.py", "rather longer now\n");  // same inode, truncated and rewritten
  const auto f = add_fails(entry);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::file_changed));
  EXPECT_NE(f->message.find("grown.py"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("size"), std::string::npos) << f->message;
}

TEST(zip_writer, a_piece_is_its_bytes_of_the_file_under_the_files_name) {
  temp_dir tree, out;
  std::string content;
  for (int i = 0; i < 40000; ++i) content += fmt::format("{:08}\n", i);
  tree.write("lib/big.so", content);
  auto piece = entry_for(tree.path(), "lib/big.so");
  piece.piece_offset = 100001;
  piece.piece_length = 123456;
  const auto zip = save(out, "piece.zip", zip_of({piece}));
  expect_unzip_accepts(zip);
  const auto infos = python_view(zip);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].name, "lib/big.so");
  EXPECT_EQ(infos[0].size, 123456u);
  EXPECT_EQ(infos[0].sha256, net::hex_sha256(content.substr(100001, 123456)));

  // A piece notices a file rewritten since it was hashed, like a whole file.
  tree.write("lib/big.so", content + "more");
  const auto f = add_fails(piece);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::file_changed));
}

TEST(zip_writer, a_file_rewritten_with_the_same_size_but_a_new_mtime_is_file_changed) {
  temp_dir tree;
  tree.write("same.py", "aaaa\n");
  auto entry = entry_for(tree.path(), "same.py");
  entry.key.mtime_ns -= 1'000'000'000;  // as if hashed a second before the last write
  const auto f = add_fails(entry);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::file_changed));
  EXPECT_NE(f->message.find("same.py"), std::string::npos) << f->message;
}

TEST(zip_writer, a_file_replaced_by_another_is_file_changed) {
  temp_dir tree;
  tree.write("swapped.py", "one\n");
  const auto entry = entry_for(tree.path(), "swapped.py");
  tree.write("new.py", "two\n");
  fs::rename(tree / "new.py", tree / "swapped.py");  // what editors and pip do: a new inode
  const auto f = add_fails(entry);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::file_changed));
}

// Root reads anything chmod 000, so these use failures root cannot bypass.
TEST(zip_writer, a_source_open_refuses_is_unreadable_file) {
  temp_dir tree;
  tree.write("real.py", "x\n");
  auto entry = entry_for(tree.path(), "real.py");
  fs::create_symlink("loop-b", tree / "loop-a");  // open() fails with ELOOP
  fs::create_symlink("loop-a", tree / "loop-b");
  entry.path = "loop.py";
  entry.source = tree / "loop-a";
  const auto f = add_fails(entry);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::unreadable_file));
  EXPECT_NE(f->message.find("loop.py"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("loop-a"), std::string::npos) << f->message;
}

TEST(zip_writer, a_source_read_fails_on_is_unreadable_file) {
  // A regular file (for stat) whose read() at offset 0 fails with EIO, even for root: page 0 is never mapped.
  const auto entry = entry_for("/proc/self", "mem");
  const auto f = add_fails(entry);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, make_error_code(errc::unreadable_file));
  EXPECT_NE(f->message.find("cannot read"), std::string::npos) << f->message;
}

TEST(zip_writer, a_fifo_or_directory_in_place_of_the_file_is_unreadable_file_and_does_not_block) {
  temp_dir tree;
  ASSERT_EQ(::mkfifo((tree / "fifo").c_str(), 0644), 0);
  fs::create_directory(tree / "dir");
  for (const char* name : {"fifo", "dir"}) {
    SCOPED_TRACE(name);
    const auto f = add_fails(entry_for(tree.path(), name));
    ASSERT_TRUE(f);
    EXPECT_EQ(f->code, make_error_code(errc::unreadable_file));
    EXPECT_NE(f->message.find("not a regular file"), std::string::npos) << f->message;
  }
}

TEST(zip_writer, an_abandoned_writer_writes_no_central_directory) {
  temp_dir tree;
  tree.write("big.txt", std::string(300'000, 'z') + "tail");  // more than one output block
  tree.write("small.txt", "small\n");
  const auto entries = entries_of(tree.path());
  std::string bytes;
  {
    zip_writer writer({.level = 0}, [&](std::string_view piece) { bytes.append(piece); });
    diagnostics diag;
    for (const auto& entry : entries) ASSERT_TRUE(writer.add(entry, diag)) << diag.message;
  }
  EXPECT_GT(bytes.size(), 200'000u);  // some of the archive was out already...
  EXPECT_EQ(bytes.find("PK\x01\x02"), std::string::npos);  // ...but no central directory
  EXPECT_EQ(bytes.find("PK\x05\x06"), std::string::npos);

  // Also after a failure, and with nothing added at all.
  { zip_writer writer({}, [](std::string_view) {}); }
  {
    zip_writer writer({}, [](std::string_view) {});
    auto gone = entries[0];
    gone.source = tree / "not-there";
    diagnostics diag;
    EXPECT_FALSE(writer.add(gone, diag));
  }
}

TEST(zip_writer, an_exception_from_the_sink_leaves_through_finish) {
  temp_dir tree;
  tree.write("a.py", "a\n");
  zip_writer writer({}, [](std::string_view) { throw std::runtime_error("disk full"); });
  diagnostics diag;
  ASSERT_TRUE(writer.add(entries_of(tree.path()).at(0), diag)) << diag.message;  // still in the output block
  EXPECT_THROW(
      {
        try {
          (void)writer.finish(diag);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "disk full");
          throw;
        }
      },
      std::runtime_error);
}

TEST(zip_writer, an_empty_archive_is_a_valid_zip) {
  temp_dir out;
  const auto bytes = zip_of({});
  EXPECT_EQ(bytes.size(), 22u);  // just the end of central directory record
  EXPECT_TRUE(python_view(save(out, "empty.zip", bytes)).empty());
}

}  // namespace
}  // namespace ferry::packaging
