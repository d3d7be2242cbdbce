// Entries written into a layer's directory by the node program's writer: names byte for byte, modes,
// symlinks kept inside, and every hostile entry refused naming the layer and the entry with nothing written
// outside the layer, across shards too; a full disk names the directory and the bytes needed.
#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/layer_writer.hpp"

#include "zip_fixture.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <filesystem>
#include <sys/mount.h>
#include <sys/stat.h>

namespace ferry::agent::node {
namespace {

namespace fs = std::filesystem;
using test_zip::make_zip;
using test_zip::open_zip;
using test_zip::spec_entry;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// Extracts `zip` into `root` through one writer; the error, if any.
error_code extract(const std::string& zip, int root, const fs::path& root_path, diagnostics& diag,
                   std::uint64_t layer_bytes = 0) {
  auto opened = open_zip(zip, diag);
  if (!opened) return opened.error();
  layer_writer writer(root, root_path.string(), "testlayer", layer_bytes);
  zip_stream stream(opened->entries, opened->tail.directory_offset);
  if (auto r = stream.feed(std::string_view(zip).substr(0, opened->tail.directory_offset), writer, diag); !r)
    return r.error();
  auto done = stream.finish(diag);
  return done ? error_code{} : done.error();
}

class layer_dir : public ::testing::Test {
 protected:
  layer_dir() {
    fs::create_directories(root_path);
    root = ::open(root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~layer_dir() override { ::close(root); }

  error_code extract_entries(const std::vector<spec_entry>& entries, diagnostics& diag) {
    return extract(make_zip(entries), root, root_path, diag);
  }

  // Everything below dir, outside the layer, that the test did not make.
  std::vector<std::string> outside() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir.path())) {
      const auto p = e.path().string();
      if (!p.starts_with(root_path.string()) && p != root_path.string() && p != (dir / "outside").string())
        out.push_back(p);
    }
    return out;
  }

  ferry::test::temp_dir dir;
  fs::path root_path = dir / "layer";
  int root = -1;
};

TEST_F(layer_dir, names_arrive_byte_for_byte_with_their_modes) {
  diagnostics diag;
  ASSERT_FALSE(extract_entries({{"new\nline", "n"},
                                {"data", "plain"},
                                {"data;1", "versioned"},
                                {"caf\xc3\xa9.py", "utf8"},
                                {"latin\xe9", "latin1"},
                                {"bin/tool", "#!/bin/sh\n", 0755},
                                {"secret", "s", 0600},
                                {"setuid", "x", 04755},
                                {"bin/alias", "tool", 0777, true},
                                {"empty/", "", 0750}},
                               diag))
      << diag.message;
  EXPECT_EQ(ferry::test::read_file(root_path / "new\nline"), "n");
  EXPECT_EQ(ferry::test::read_file(root_path / "data"), "plain");
  EXPECT_EQ(ferry::test::read_file(root_path / "data;1"), "versioned");
  EXPECT_EQ(ferry::test::read_file(root_path / "caf\xc3\xa9.py"), "utf8");
  EXPECT_EQ(ferry::test::read_file(root_path / "latin\xe9"), "latin1");
  EXPECT_EQ(mode_of(root_path / "bin/tool"), 0755u);
  EXPECT_EQ(mode_of(root_path / "secret"), 0600u);
  EXPECT_EQ(mode_of(root_path / "setuid"), 0755u) << "set-id bits never come from a download";
  EXPECT_EQ(fs::read_symlink(root_path / "bin/alias"), "tool");
  EXPECT_TRUE(fs::is_directory(root_path / "empty"));
}

struct hostile_case {
  std::vector<spec_entry> entries;
  std::string says;
};

TEST_F(layer_dir, hostile_entries_are_refused_naming_the_layer_and_the_entry_and_write_nothing_outside) {
  fs::create_directories(dir / "outside");
  const std::vector<hostile_case> cases = {
      {{{"/etc/evil", "x"}}, "is absolute"},
      {{{"../evil", "x"}}, "has a '..' component"},
      {{{"a/../../evil", "x"}}, "has a '..' component"},
      {{{"a//b", "x"}}, "has an empty component"},
      {{{"./a", "x"}}, "has a '.' component"},
      {{{"up", "../outside", 0777, true}, {"up/evil", "x"}}, "outside the layer"},
      {{{"abs", "/tmp", 0777, true}}, "outside the layer"},
      // Each link stays inside by itself; resolved through the first, the second climbs out.
      {{{"loop", ".", 0777, true}, {"up", "loop/..", 0777, true}}, "outside the layer"},
      {{{"a/", "", 0755}, {"a/loop", "..", 0777, true}, {"a/up", "loop/../..", 0777, true}}, "outside the layer"},
      {{{"dup", "one"}, {"dup", "two"}}, "is there twice"},
  };
  for (const auto& c : cases) {
    fs::remove_all(root_path);
    fs::create_directories(root_path);
    ::close(root);
    root = ::open(root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    diagnostics diag;
    const auto ec = extract_entries(c.entries, diag);
    EXPECT_EQ(ec, make_error_code(errc::hostile_entry)) << c.entries.back().name << ": " << diag.message;
    EXPECT_NE(diag.message.find("layer testlayer"), std::string::npos) << diag.message;
    EXPECT_NE(diag.message.find(c.says), std::string::npos) << diag.message;
    EXPECT_TRUE(fs::is_empty(dir / "outside")) << c.entries.back().name;
    EXPECT_TRUE(outside().empty()) << c.entries.back().name;
  }
}

TEST_F(layer_dir, a_symlink_from_one_shard_cannot_carry_another_shard_outside) {
  // Shard 0 makes `lib` a link that stays inside the layer by itself (to `.`), then, in another layer
  // directory for the attack, a link to a directory outside made by hand: shard 1's `lib/x` must not
  // pass through either.
  fs::create_directories(dir / "outside");
  fs::create_directory_symlink(dir / "outside", root_path / "escape");
  diagnostics diag;
  ASSERT_FALSE(extract(make_zip({{"lib", ".", 0777, true}}), root, root_path, diag)) << diag.message;
  for (const auto* name : {"lib/x", "escape/x", "lib/escape/x"}) {
    diagnostics d;
    EXPECT_EQ(extract(make_zip({{name, "payload"}}), root, root_path, d), make_error_code(errc::hostile_entry))
        << name << ": " << d.message;
    EXPECT_NE(d.message.find("passes through a symlink"), std::string::npos) << d.message;
  }
  EXPECT_TRUE(fs::is_empty(dir / "outside"));
}

TEST_F(layer_dir, a_full_disk_names_the_directory_and_the_bytes_needed) {
  const auto small = dir / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=64k") != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  struct unmount {
    fs::path p;
    ~unmount() { ::umount2(p.c_str(), MNT_DETACH); }
  } guard{small};
  const auto layer = small / "layer";
  fs::create_directories(layer);
  const int fd = ::open(layer.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  diagnostics diag;
  const auto ec = extract(make_zip({{"big.bin", std::string(1 << 20, 'b')}}), fd, layer, diag, 1 << 20);
  ::close(fd);
  EXPECT_EQ(ec, make_error_code(errc::disk_full)) << diag.message;
  EXPECT_NE(diag.message.find("no space left in " + layer.string()), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("layer testlayer needs"), std::string::npos) << diag.message;
}

TEST(entry_name, names_are_split_as_bytes_and_hostile_ones_refused) {
  diagnostics diag;
  auto ok = split_entry_name("a/b\nc/d;1", "L", diag);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->dirs.size(), 2u);
  EXPECT_EQ(ok->leaf, "d;1");
  auto dir = split_entry_name("a/b/", "L", diag);
  ASSERT_TRUE(dir);
  EXPECT_TRUE(dir->directory);
  EXPECT_EQ(dir->leaf, "b");
  for (std::string_view bad : {std::string_view(""), std::string_view("/x"), std::string_view("x/../y"),
                               std::string_view(".."), std::string_view("x//y"), std::string_view("a\0b", 3)}) {
    diagnostics d;
    auto r = split_entry_name(bad, "L", d);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::hostile_entry));
    }
  }
}

TEST(entry_name, a_link_may_climb_only_as_far_as_the_layer_root) {
  diagnostics diag;
  auto deep = split_entry_name("a/b/link", "L", diag);
  ASSERT_TRUE(deep);
  EXPECT_TRUE(link_stays_inside(*deep, "../../top"));
  EXPECT_TRUE(link_stays_inside(*deep, "./x/y"));
  EXPECT_FALSE(link_stays_inside(*deep, "../../../out"));
  EXPECT_FALSE(link_stays_inside(*deep, "/abs"));
  EXPECT_FALSE(link_stays_inside(*deep, "x/../.."));  // a `..` after a name may climb through a link
  EXPECT_FALSE(link_stays_inside(*deep, "loop/.."));
  EXPECT_FALSE(link_stays_inside(*deep, ""));
}

}  // namespace
}  // namespace ferry::agent::node
