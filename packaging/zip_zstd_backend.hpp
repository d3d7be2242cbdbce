#pragma once
// The zstd backend of zip_writer (packaging.codec "zstd", the default). libarchive 3.6.2 cannot write ZIP
// method 93, so this is ferry's own container, made to the shared zstd layer format:
//   - a regular file is method 93 with a data descriptor (bit 3: its CRC-32 and sizes are only known at its
//     end), compressed at zip_options::zstd_level with the content size pledged and no zstd checksum (the
//     CRC-32 covers it), single-threaded: the same files give the same bytes. Empty files and names
//     already_compressed() lists are stored (method 0), symlinks are stored with their target as data;
//   - a file over frame_size goes out as independent frames of exactly frame_size input bytes (the last one
//     shorter), then ONE skippable frame holding zstd's seek table (contrib/seekable_format: u32 magic
//     0x184D2A5E, u32 size, n {compressed, decompressed} u32 pairs, then n, a descriptor byte 0 and
//     0x8F92EAB1). Frames can be compressed and decompressed apart, and a frame at a time bounds memory;
//     the zstd CLI, libarchive and Python skip the table;
//   - with a dictionary (zip_options::dictionary) the zip's first entry is that dictionary, stored, named
//     ".ferry-zstd-dictionary", mode 0100444, marked by the extra field 0x7a66 = 0x01 in both its headers;
//     files under dictionary_file_limit are compressed with it (its dictID in their frame headers), larger
//     ones without;
//   - Zip64 records (zip_records.hpp) where sizes or offsets may pass 0xFFFFFFFF.
// Memory: the compressor's state for one frame, one output block and the central directory.
#include "packaging/zip_backend.hpp"
#include "packaging/zstd_dictionary.hpp"
#include "packaging/zstd_layout.hpp"
#include "packaging/zip_records.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

struct ZSTD_CCtx_s;
struct ZSTD_CDict_s;

namespace ferry::packaging {

struct zip_options;

class zip_zstd_backend final : public zip_backend {
 public:
  static constexpr std::uint64_t frame_size = zstd_layout::frame_size;
  static constexpr std::string_view dictionary_name = zstd_layout::dictionary_name;

  zip_zstd_backend(const zip_options& options, zip_sink out);
  ~zip_zstd_backend() override;

  result<void> add_symlink(const file_entry& entry, diagnostics& diag) override;
  result<void> begin_file(const file_entry& entry, diagnostics& diag) override;
  result<void> write(std::string_view content, diagnostics& diag) override;
  result<void> end_file(diagnostics& diag) override;
  result<void> finish(diagnostics& diag) override;
  std::uint64_t bytes_out() const override { return bytes_out_; }

 private:
  struct cctx_deleter {
    void operator()(ZSTD_CCtx_s* c) const;
  };
  struct cdict_deleter {
    void operator()(ZSTD_CDict_s* d) const;
  };

  // The dictionary entry, before anything else.
  void start();
  // A stored entry whose content is known now (a symlink's target, the dictionary).
  void add_known(zip_records::entry e, std::string_view content);
  result<void> begin_frame(diagnostics& diag);
  // Feeds the current frame; `end` finishes it (and records it in the seek table).
  result<void> compress(std::string_view input, bool end, diagnostics& diag);
  void write_seek_table();
  void emit(std::string_view bytes);
  void flush();
  error_code zstd_failure(std::size_t code, diagnostics& diag) const;

  int level_;
  std::string dictionary_;
  zip_sink out_;
  std::unique_ptr<ZSTD_CCtx_s, cctx_deleter> cctx_;
  std::unique_ptr<ZSTD_CDict_s, cdict_deleter> cdict_;
  std::vector<zip_records::entry> directory_;
  std::string block_;             // output not yet given to the sink
  std::vector<char> zstd_out_;    // what one compression call produces
  std::uint64_t offset_ = 0;      // bytes emitted so far: the next record's offset
  std::uint64_t bytes_out_ = 0;   // bytes the sink has
  bool started_ = false;
  // The regular file being written: its record (the last in directory_) and its frames.
  std::uint64_t entry_start_ = 0;  // offset_ where its data begins
  std::uint64_t frame_start_ = 0;  // offset_ where the current frame begins
  std::uint64_t frame_left_ = 0;   // input bytes the current frame still takes; 0: none open
  std::uint64_t written_ = 0;      // input bytes so far
  std::vector<std::pair<std::uint32_t, std::uint32_t>> frames_;  // compressed, decompressed
};

}  // namespace ferry::packaging
