#pragma once
// Extracts a zip as its bytes arrive, without I/O: feed() takes the body (everything before the central
// directory) in pieces of any size, and hands each entry's uncompressed content to an entry_sink. The
// entries come from the central directory (zip_directory.hpp), read first, so every size is known before
// its content arrives: a local header must name the same file, stored bytes end where the directory says,
// deflate (8) and zstd (93, zstd_entry.hpp) are decompressed as streams in bounded memory, inflated output
// may not pass the entry's size (a zip bomb stops at the first byte too many), and each entry's CRC-32 and
// size are checked at its end.
//
// A zstd shard's dictionary entry (zip_directory.hpp) is read like any stored entry, checked, and loaded
// for the frames after it; it is never handed to the sink: it is not one of the shard's files.
#include "agent/node/zip_directory.hpp"
#include "agent/node/zstd_entry.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct z_stream_s;

namespace ferry::agent::node {

// Where entries go. Any error stops the stream; diagnostics name the entry.
class entry_sink {
 public:
  virtual ~entry_sink() = default;
  virtual result<void> begin(const zip_entry& entry, diagnostics& diag) = 0;
  virtual result<void> data(std::string_view bytes, diagnostics& diag) = 0;
  virtual result<void> end(diagnostics& diag) = 0;
};

class zip_stream {
 public:
  // `entries` sorted by local offset; `body_end` is the central directory's offset.
  zip_stream(std::vector<zip_entry> entries, std::uint64_t body_end);
  ~zip_stream();
  zip_stream(const zip_stream&) = delete;
  zip_stream& operator=(const zip_stream&) = delete;

  // Consumes every byte of `bytes`; fails with errc::bad_zip, or with what the sink failed with.
  result<void> feed(std::string_view bytes, entry_sink& sink, diagnostics& diag);
  // The body is over: every entry must be complete and `body_end` reached.
  result<void> finish(diagnostics& diag) const;

  std::uint64_t position() const { return position_; }
  std::size_t entries_done() const { return done_; }

 private:
  enum class state { seek, header, data, trailer };
  struct inflater_deleter {
    void operator()(z_stream_s* z) const;
  };

  result<void> on_header(entry_sink& sink, diagnostics& diag);
  result<std::size_t> on_data(std::string_view bytes, entry_sink& sink, diagnostics& diag);
  result<std::size_t> on_inflate(std::string_view bytes, entry_sink& sink, diagnostics& diag);
  result<std::size_t> on_zstd(std::string_view bytes, entry_sink& sink, diagnostics& diag);
  result<void> end_dictionary(diagnostics& diag);
  result<void> emit(std::string_view out, entry_sink& sink, diagnostics& diag);
  result<void> end_entry(entry_sink& sink, diagnostics& diag);
  error_code damaged(diagnostics& diag, std::string text) const;

  std::vector<zip_entry> entries_;
  std::uint64_t body_end_;
  std::uint64_t position_ = 0;
  std::size_t index_ = 0;  // the entry being read
  std::size_t done_ = 0;
  state state_ = state::seek;
  std::string header_;     // the local header (and name and extra) gathered so far
  std::size_t header_want_ = 0;
  std::uint64_t compressed_left_ = 0;
  std::uint64_t produced_ = 0;
  std::uint32_t crc_ = 0;
  bool inflate_ended_ = false;
  std::unique_ptr<z_stream_s, inflater_deleter> inflater_;
  std::unique_ptr<zstd_entry> zstd_;  // made at the first zstd entry
  std::string dictionary_bytes_;      // the dictionary entry, while it is read
  std::optional<zstd_dictionary> dictionary_;
  std::vector<unsigned char> out_;
};

}  // namespace ferry::agent::node
