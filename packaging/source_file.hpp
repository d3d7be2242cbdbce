#pragma once
// One regular file read into a zip, whatever compresses it. The zip must hold exactly the content the
// entry's digest was taken from, so the file is checked against entry.key when it is opened and again
// after its last byte: fstat must show the same inode, size and mtime_ns, and reading must end at exactly
// the hashed size (a file that grew is noticed before its extra bytes reach the zip). A piece of a large
// file (file_entry::is_piece) is read from its offset for exactly its length, the fstat at its end noticing
// a file that changed. Every failure names
// the entry and its source path: errc::unreadable_file when the file cannot be opened, stat or read (or
// is no longer a regular file), errc::file_changed when it vanished or changed since it was hashed.
#include "packaging/file_entry.hpp"
#include "packaging/unique_fd.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <span>
#include <string_view>

namespace ferry::packaging {

class source_file {
 public:
  // Opens entry.source and checks it is still the file entry.key describes.
  static result<source_file> open(const file_entry& entry, diagnostics& diag);

  // Reads the next piece into `buffer`. An empty view: the file ended at its hashed size and still is the
  // file that was hashed (checked once more then).
  result<std::string_view> read_some(std::span<char> buffer, diagnostics& diag);

  std::uint64_t bytes_read() const { return read_; }
  std::uint64_t size() const { return entry_->content_size(); }  // as hashed: the piece, or the whole file

 private:
  source_file(const file_entry& entry, unique_fd fd) : entry_(&entry), fd_(std::move(fd)) {}

  const file_entry* entry_;
  unique_fd fd_;
  std::uint64_t read_ = 0;
};

}  // namespace ferry::packaging
