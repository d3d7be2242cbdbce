#pragma once
// The content of a zstd zip entry (method 93) as ferry writes it (docs/packing.md, "zstd shards"),
// without I/O: an entry of at most 4 MiB is one frame; a larger one is independent frames of exactly
// 4 MiB (the last shorter), then one skippable frame holding the seek table (zstd's seekable format),
// which is checked against the frames decoded: their count, and each one's compressed and decompressed
// size. Every frame states its content size (at most 4 MiB), so a frame's buffer is never larger than
// that, whatever window it claims. A frame naming a dictionary must name the shard's (zstd_dictionary).
//
// An entry over 4 MiB in one frame is refused: the writer cuts every such file into frames, so a single
// large frame is not ferry's, and it would need a window as large as the entry.
#include "packaging/zstd_layout.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct ZSTD_DCtx_s;
struct ZSTD_DDict_s;

namespace ferry::agent::node {

inline constexpr std::uint64_t zstd_frame_size = packaging::zstd_layout::frame_size;
// The dictionary entry's cap: its DDict holds a copy of it and tables of fixed size.
inline constexpr std::uint64_t zstd_dictionary_limit = 1 << 20;

// A shard's dictionary (its first entry), loaded once for every frame of the shard that names it.
class zstd_dictionary {
 public:
  // `bytes` must be a zstd dictionary (magic and a non-zero id); `name` is the entry's, for messages.
  static result<zstd_dictionary> load(std::string_view bytes, std::string_view name, diagnostics& diag);

  unsigned id() const { return id_; }
  const ZSTD_DDict_s* get() const { return ddict_.get(); }

 private:
  struct deleter {
    void operator()(ZSTD_DDict_s* d) const;
  };
  std::unique_ptr<ZSTD_DDict_s, deleter> ddict_;
  unsigned id_ = 0;
};

class zstd_entry {
 public:
  // Where decompressed bytes go: the zip stream's size and CRC checks, then the sink.
  using output = std::function<result<void>(std::string_view)>;

  zstd_entry();
  ~zstd_entry();
  zstd_entry(const zstd_entry&) = delete;
  zstd_entry& operator=(const zstd_entry&) = delete;

  // Starts an entry of `size` bytes (from the central directory); `dictionary` is null when the shard has
  // none. `name` is kept for messages and must outlive the entry.
  void begin(std::string_view name, std::uint64_t size, const zstd_dictionary* dictionary);
  // Consumes every byte, decompressing through `buffer` into `out`; fails with errc::bad_zip naming the
  // entry, or with what `out` failed with.
  result<void> feed(std::string_view bytes, std::span<unsigned char> buffer, const output& out, diagnostics& diag);
  // The entry's bytes are over: its frames and seek table must be complete and agree.
  result<void> finish(diagnostics& diag) const;

 private:
  enum class phase { header, frame, table, done };
  struct frame_sizes {
    std::uint64_t compressed = 0;
    std::uint64_t decompressed = 0;
  };
  struct dctx_deleter {
    void operator()(ZSTD_DCtx_s* d) const;
  };

  result<std::size_t> on_header(std::string_view bytes, std::span<unsigned char> buffer, const output& out,
                                diagnostics& diag);
  result<void> start_frame(std::span<unsigned char> buffer, const output& out, diagnostics& diag);
  result<void> start_table(std::uint64_t table_size, diagnostics& diag);
  result<std::size_t> on_frame(std::string_view bytes, std::span<unsigned char> buffer, const output& out,
                               diagnostics& diag);
  std::size_t on_table(std::string_view bytes);
  result<void> check_table(diagnostics& diag) const;
  bool seekable() const { return size_ > zstd_frame_size; }
  error_code damaged(diagnostics& diag, std::string text) const;

  std::unique_ptr<ZSTD_DCtx_s, dctx_deleter> dctx_;
  std::string_view name_;
  std::uint64_t size_ = 0;
  const zstd_dictionary* dictionary_ = nullptr;
  phase phase_ = phase::header;
  std::string head_;  // the next frame's header gathered so far, then the seek table's content
  std::size_t table_want_ = 0;
  frame_sizes frame_;  // the frame being decoded
  std::vector<frame_sizes> frames_;  // those decoded; at most one per 4 MiB of output
};

}  // namespace ferry::agent::node
