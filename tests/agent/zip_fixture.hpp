#pragma once
// Zips for the node program's tests, made by Python's zipfile from a spec (tests/peers/make_zip.py): the
// entries ferry's own writer never makes (hostile names, odd modes) as well as ordinary ones, and a
// reader that runs agent/node's sans-io zip code over the bytes as they would arrive.
#include "agent/node/zip_stream.hpp"
#include "net/digest.hpp"
#include "packaging/layer.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::agent::node::test_zip {

struct spec_entry {
  std::string name;
  std::string data;
  unsigned mode = 0644;
  bool symlink = false;
  bool deflate = true;
  bool zip64 = false;
  bool zstd = false;                    // method 93, a frame per `zstd_frame` bytes (the format's 4 MiB)
  std::uint64_t zstd_frame = 4 << 20;
  std::string zstd_table = "auto";      // after several frames; "none", "truncated", "wrong", "always"
  bool zstd_dict = false;               // with the zip's dictionary entry (the last before this one)
  std::string zstd_dict_bytes;          // with this dictionary instead
  bool dictionary = false;              // the shard's zstd dictionary: `data` holds it
};

inline std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string make_zip(const std::vector<spec_entry>& entries, const std::string& comment = "") {
  boost::json::array spec;
  for (const auto& e : entries)
    spec.push_back(boost::json::object{{"name_hex", hex(e.name)}, {"data", hex(e.data)}, {"hex", true}, {"mode", e.mode},
                                       {"symlink", e.symlink}, {"deflate", e.deflate}, {"zip64", e.zip64},
                                       {"zstd", e.zstd}, {"zstd_frame", e.zstd_frame}, {"zstd_table", e.zstd_table},
                                       {"zstd_dict", e.zstd_dict}, {"zstd_dict_hex", hex(e.zstd_dict_bytes)},
                                       {"dictionary", e.dictionary}});
  ferry::test::temp_dir dir;
  const auto out = dir / "out.zip";
  const auto spec_file = dir.write("spec.json", boost::json::serialize(spec));
  std::vector<std::string> argv = {ferry::test::system_python, FERRY_SOURCE_DIR "/tests/peers/make_zip.py",
                                   out.string(), spec_file.string()};
  if (!comment.empty()) argv.push_back(comment);
  auto r = ferry::test::run(argv);
  if (r.exit_code != 0) throw std::runtime_error("make_zip.py: " + r.err);
  return ferry::test::read_file(out);
}

// A small Python module, one of a family: modules of one `family` share their words, as the files of a
// site-packages shard do, so a dictionary trained on some of them compresses the others.
inline std::string sample_module(unsigned family, int i) {
  const char* words[] = {"request", "session", "response", "headers", "encoding", "timeout", "adapter", "cookie"};
  std::string out = "# Module " + std::to_string(i) + " of family " + std::to_string(family) + "\n";
  out += "from __future__ import annotations\n\nimport os\nimport sys\n\n";
  for (int f = 0; f < 12; ++f) {
    const auto* w = words[(family * 3 + i + f) % 8];
    out += "def " + std::string(w) + "_" + std::to_string(family) + "_" + std::to_string(f) + "(self, value=None):\n";
    out += "    \"\"\"Return the " + std::string(w) + " of family " + std::to_string(family) + ".\"\"\"\n";
    out += "    if value is None:\n        return self._" + std::string(w) + "\n";
    out += "    return value * " + std::to_string(i * 7 + f) + "\n\n";
  }
  return out;
}

// A zstd dictionary trained by the zstd command on 200 modules of `family`: two families give two
// dictionaries, with two ids.
inline std::string train_dictionary(unsigned family) {
  ferry::test::temp_dir dir;
  const auto out = dir / "dict";
  std::vector<std::string> argv = {"zstd", "-q", "--train", "--maxdict=16384", "-o", out.string()};
  for (int i = 0; i < 200; ++i)
    argv.push_back(dir.write("m" + std::to_string(i) + ".py", sample_module(family, 1000 + i)).string());
  auto r = ferry::test::run(argv);
  if (r.exit_code != 0) throw std::runtime_error("zstd --train: " + r.err);
  return ferry::test::read_file(out);
}

// The id a workstation gives a shard of `entries` (packaging/layer.hpp), which the node program checks what
// it inflates against: the zip must hold them in this order (by path), as ferry's writer does.
inline std::string shard_id(const std::vector<spec_entry>& entries) {
  std::vector<packaging::file_entry> files;
  for (const auto& e : entries) {
    if (e.dictionary) continue;  // not one of the shard's files
    packaging::file_entry f;
    f.path = e.name;
    f.type = e.symlink ? packaging::file_entry::kind::symlink : packaging::file_entry::kind::regular;
    f.permissions = e.symlink ? 0777 : e.mode;
    f.digest = net::sha256(e.data);
    files.push_back(std::move(f));
  }
  return net::to_hex(packaging::entries_id(files));
}

// The directory of a whole zip held in memory, as the node program reads it.
struct opened_zip {
  zip_tail tail;
  std::vector<zip_entry> entries;
};

inline result<opened_zip> open_zip(std::string_view zip, diagnostics& diag) {
  const auto tail_size = std::min<std::size_t>(zip.size(), tail_span);
  auto tail = parse_tail(zip.substr(zip.size() - tail_size), zip.size(), diag);
  if (!tail) return tail.error();
  auto entries = parse_directory(zip.substr(tail->directory_offset, tail->directory_size), *tail, diag);
  if (!entries) return entries.error();
  return opened_zip{*tail, std::move(*entries)};
}

}  // namespace ferry::agent::node::test_zip
