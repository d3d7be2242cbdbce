#pragma once
// Turns a layer's sorted file entries into a zip, streamed to a callback as it is produced: no temp files.
// Memory is one read buffer, one output block, the compressor's state and the central directory, which a
// zip can only write at its end (66 bytes plus the name per entry: ~4 MB for 38k files). The output depends
// only on the entries' paths, modes and contents (never on mtimes, owners, the locale or the time zone),
// so the same layer zips to the same bytes on every machine and its digest can name it.
//
// One writer, two codecs (zip_options::codec, config packaging.codec): deflate through libarchive
// (zip_deflate_backend.hpp), zstd in ferry's own container (zip_zstd_backend.hpp, which describes its
// format). This facade reads the files for both (source_file.hpp) and keeps the output budget
// of add_some(), so callers never see which one is at work.
#include "packaging/file_entry.hpp"
#include "packaging/source_file.hpp"
#include "packaging/zip_backend.hpp"
#include "packaging/zip_codec.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

struct zip_options {
  zip_codec codec = zip_codec::deflate;  // config packaging.codec (whose default is zstd)
  int level = 1;       // deflate level 1..9 (config packaging.compression_level, default 1: a fast one); 0 = store all
  int zstd_level = 3;  // zstd level 1..19 (config packaging.zstd_level)
  // zstd only: the shard's dictionary (packaging/zstd_dictionary.hpp), empty for none. Written as the zip's
  // first entry; files under dictionary_file_limit are compressed with it.
  std::string dictionary;
};

// Synchronous and single-threaded: the caller runs it on a CPU thread pool and moves the bytes on.
class zip_writer {
 public:
  // Receives every output byte in order, synchronously, from inside add()/finish(). It may throw: the
  // exception leaves add()/finish() (never through libarchive's C frames) and the archive is then unusable.
  using sink = zip_sink;

  // How much of a file is read at once, and how much output is gathered before the sink sees it.
  static constexpr std::size_t read_chunk = 1 << 20;
  static constexpr std::size_t output_block = zip_output_block;

  zip_writer(const zip_options& options, sink out);
  ~zip_writer();  // abandons an unfinished archive without writing a central directory
  zip_writer(const zip_writer&) = delete;
  zip_writer& operator=(const zip_writer&) = delete;

  // Appends one entry. Regular files are read from entry.source; symlinks are stored as symlinks
  // (target = entry.link_target). Fails (and the archive is then unusable) if the file cannot be opened or
  // read (errc::unreadable_file), or vanished / changed since entry.key was taken (errc::file_changed: fstat
  // must show the same inode, size and mtime_ns as entry.key, before and after reading). The diagnostics
  // name the file path.
  result<void> add(const file_entry& entry, diagnostics& diag);
  // The same, a piece at a time, so a caller that cuts the output into upload parts never holds more
  // than a part of a big file: reads until at least `output_budget` more bytes went to the sink or the
  // entry is complete, and returns true once it is. Call again with the same entry until then.
  result<bool> add_some(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag);
  result<void> finish(diagnostics& diag);  // writes the central directory
  std::uint64_t bytes_out() const { return backend_->bytes_out(); }
  std::uint64_t bytes_in() const { return bytes_in_; }  // file content read so far

 private:
  result<void> check_usable(diagnostics& diag) const;
  result<bool> add_step(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag);
  // Copies until EOF or until `output_budget` more bytes went out; true at EOF (after the size checks).
  result<bool> copy_some(std::uint64_t output_budget, diagnostics& diag);
  // Marks the archive unusable with the reason in `diag`.
  error_code fail(error_code ec, const diagnostics& diag);

  std::unique_ptr<zip_backend> backend_;
  std::vector<char> buffer_;            // the one read buffer, read_chunk bytes
  std::optional<source_file> current_;  // the regular file being copied by add_some(), between calls
  std::uint64_t bytes_in_ = 0;
  error_code failed_;    // set once anything failed: every later call returns it
  std::string failure_;  // what failed, for those later calls
  bool finished_ = false;
};

// True for names whose content is already compressed (.zip .gz .whl .png .npz ...): storing them costs
// nothing and saves compressing megabytes for no gain. Case-insensitive.
bool already_compressed(std::string_view path);

}  // namespace ferry::packaging
