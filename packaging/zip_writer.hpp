#pragma once
// Turns a layer's sorted file entries into a zip, streamed to a callback as it is produced: no temp files.
// Memory is one read buffer, one output block, zlib's state and the central directory, which a zip can only
// write at its end (66 bytes plus the name per entry: ~4 MB for 38k files). The output depends only on the
// entries' paths, modes and contents (never on mtimes, owners, the locale or the time zone), so the same
// layer zips to the same bytes on every machine and its digest can name it.
//
// Built on libarchive's zip writer. What that gives (libarchive 3.6.2):
//   - deflate at a chosen level (zip option "compression-level"), or store, switchable between entries;
//   - Zip64 when an entry or the archive passes 4 GiB;
//   - the mode in the external attributes (Info-ZIP style), which unzip and Python read back;
//   - a data descriptor after every regular file (the CRC is only known at the end), which every reader takes.
// What it needs help with, done here:
//   - it stamps the DOS time from localtime(mtime): we leave mtime unset (0), which is before 1980 in every
//     time zone and so clamps to 1980-01-01 00:00:00; the "UT" extra field it always writes then carries no
//     time at all, and the "ux" field carries uid/gid 0;
//   - it sets the UTF-8 name flag (bit 11) when the name is not ASCII and nl_langinfo(CODESET) is "UTF-8":
//     we switch this thread's locale around each such header so the flag follows the name's bytes instead.
#include "packaging/file_entry.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct archive;
struct archive_entry;

namespace ferry::packaging {

struct zip_options {
  int level = 1;  // deflate level 1..9 (config packaging.compression_level, default 1: a fast one); 0 = store all
};

// Synchronous and single-threaded: the caller runs it on a CPU thread pool and moves the bytes on.
class zip_writer {
 public:
  // Receives every output byte in order, synchronously, from inside add()/finish(). It may throw: the
  // exception leaves add()/finish() (never through libarchive's C frames) and the archive is then unusable.
  using sink = std::function<void(std::string_view bytes)>;

  // How much of a file is read at once, and how much output is gathered before the sink sees it.
  static constexpr std::size_t read_chunk = 1 << 20;
  static constexpr std::size_t output_block = 128 << 10;

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
  std::uint64_t bytes_out() const { return bytes_out_; }
  std::uint64_t bytes_in() const { return bytes_in_; }  // file content read so far

 private:
  struct archive_deleter {
    void operator()(archive* a) const;
  };
  struct entry_deleter {
    void operator()(archive_entry* e) const;
  };

  static long on_write(archive* a, void* self, const void* bytes, std::size_t size);

  void open();
  result<void> check_usable(diagnostics& diag) const;
  result<void> add_symlink(const file_entry& entry, diagnostics& diag);
  // fstat(fd) still shows the regular file entry.key was taken from.
  result<void> check_unchanged(int fd, const file_entry& entry, diagnostics& diag);
  result<void> begin_regular(const file_entry& entry, diagnostics& diag);
  // Copies until EOF or until `output_budget` more bytes went out; true at EOF (after the size checks).
  result<bool> copy_some(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag);
  result<void> write_header(const file_entry& entry, diagnostics& diag);
  // Turns a libarchive failure into a result, or rethrows what the sink threw.
  result<void> archive_failure(const file_entry* entry, diagnostics& diag);
  // Marks the archive unusable and reports why.
  result<void> fail(error_code ec, std::string message, diagnostics& diag);

  zip_options options_;
  sink out_;
  std::unique_ptr<archive, archive_deleter> archive_;
  std::unique_ptr<archive_entry, entry_deleter> entry_;  // reused: cleared and refilled per entry
  std::vector<char> buffer_;                             // the one read buffer, read_chunk bytes
  std::uint64_t bytes_out_ = 0;
  std::uint64_t bytes_in_ = 0;
  int current_fd_ = -1;           // the regular file being copied by add_some(), between calls
  std::uint64_t current_read_ = 0;
  std::exception_ptr sink_error_;
  error_code failed_;    // set once anything failed: every later call returns it
  std::string failure_;  // what failed, for those later calls
  bool finished_ = false;
  bool discard_ = false;  // abandoning: output goes nowhere
};

// True for names whose content is already compressed (.zip .gz .whl .png .npz ...): storing them costs
// nothing and saves deflating megabytes for no gain. Case-insensitive.
bool already_compressed(std::string_view path);

}  // namespace ferry::packaging
