#include "agent/node/zstd_entry.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/zip_bytes.hpp"

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader: a frame's dictID and content size before its data
#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <new>

namespace ferry::agent::node {
namespace {

using packaging::zstd_layout::seek_footer;
using packaging::zstd_layout::seek_footer_magic;
using packaging::zstd_layout::seek_record;
using packaging::zstd_layout::seek_table_magic;
constexpr std::size_t frame_prefix = ZSTD_FRAMEHEADERSIZE_PREFIX(ZSTD_f_zstd1);

error_code bad_zip(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::bad_zip);
}

}  // namespace

void zstd_dictionary::deleter::operator()(ZSTD_DDict_s* d) const { ZSTD_freeDDict(d); }
void zstd_entry::dctx_deleter::operator()(ZSTD_DCtx_s* d) const { ZSTD_freeDCtx(d); }

result<zstd_dictionary> zstd_dictionary::load(std::string_view bytes, std::string_view name, diagnostics& diag) {
  // A raw-content dictionary has id 0, which no frame can name: ferry's are always trained ones.
  const unsigned id = ZSTD_getDictID_fromDict(bytes.data(), bytes.size());
  if (id == 0)
    return bad_zip(diag, fmt::format("the zstd dictionary '{}' is not one (no dictionary header)", printable_name(name)));
  zstd_dictionary d;
  d.ddict_.reset(ZSTD_createDDict(bytes.data(), bytes.size()));
  if (!d.ddict_) return bad_zip(diag, fmt::format("the zstd dictionary '{}' is damaged", printable_name(name)));
  d.id_ = id;
  return d;
}

zstd_entry::zstd_entry() : dctx_(ZSTD_createDCtx()) {
  if (!dctx_) throw std::bad_alloc();
}

zstd_entry::~zstd_entry() = default;

error_code zstd_entry::damaged(diagnostics& diag, std::string text) const { return bad_zip(diag, std::move(text)); }

void zstd_entry::begin(std::string_view name, std::uint64_t size, const zstd_dictionary* dictionary) {
  name_ = name;
  size_ = size;
  dictionary_ = dictionary;
  phase_ = phase::header;
  head_.clear();
  table_want_ = 0;
  frame_ = {};
  frames_.clear();
}

result<void> zstd_entry::feed(std::string_view bytes, std::span<unsigned char> buffer, const output& out,
                              diagnostics& diag) {
  while (!bytes.empty()) {
    result<std::size_t> used = std::size_t{0};
    switch (phase_) {
      case phase::header: used = on_header(bytes, buffer, out, diag); break;
      case phase::frame: used = on_frame(bytes, buffer, out, diag); break;
      case phase::table: used = on_table(bytes); break;
      case phase::done:
        return damaged(diag, fmt::format("entry '{}' has bytes after its zstd seek table", printable_name(name_)));
    }
    if (!used) return used.error();
    bytes.remove_prefix(*used);
    if (phase_ == phase::table && head_.size() == table_want_) {
      if (auto r = check_table(diag); !r) return r;
      phase_ = phase::done;
    }
  }
  return {};
}

// Gathers a frame's header, exactly: zstd says how long it is once it has its first bytes, and what
// follows may be the next frame's.
result<std::size_t> zstd_entry::on_header(std::string_view bytes, std::span<unsigned char> buffer, const output& out,
                                          diagnostics& diag) {
  std::size_t used = 0;
  for (;;) {
    ZSTD_frameHeader header{};
    const std::size_t want =
        head_.size() < frame_prefix ? frame_prefix : ZSTD_getFrameHeader(&header, head_.data(), head_.size());
    if (ZSTD_isError(want))
      return damaged(diag, fmt::format("entry '{}' does not decompress as zstd: {}", printable_name(name_),
                                       ZSTD_getErrorName(want)));
    if (want == 0) {
      if (header.frameType == ZSTD_skippableFrame) {
        if (auto r = start_table(header.frameContentSize, diag); !r) return r.error();
        return used;
      }
      if (auto r = start_frame(buffer, out, diag); !r) return r.error();
      return used;
    }
    const auto take = std::min(bytes.size() - used, want - head_.size());
    head_.append(bytes.substr(used, take));
    used += take;
    if (head_.size() < want) return used;
  }
}

result<void> zstd_entry::start_frame(std::span<unsigned char> buffer, const output& out, diagnostics& diag) {
  ZSTD_frameHeader header{};
  ZSTD_getFrameHeader(&header, head_.data(), head_.size());
  const auto name = printable_name(name_);
  if (!frames_.empty() && !seekable())
    return damaged(diag, fmt::format("entry '{}' of {} bytes holds more than one zstd frame (only an entry over 4 MiB "
                                     "is cut into frames)", name, size_));
  if (!frames_.empty() && frames_.back().decompressed != zstd_frame_size)
    return damaged(diag, fmt::format("zstd frame {} of entry '{}' holds {} bytes; only the last may hold less than "
                                     "4 MiB", frames_.size(), name, frames_.back().decompressed));
  if (header.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN)
    return damaged(diag, fmt::format("zstd frame {} of entry '{}' does not state its size", frames_.size() + 1, name));
  if (header.frameContentSize > zstd_frame_size)
    return damaged(diag, fmt::format("zstd frame {} of entry '{}' holds {} bytes, over the 4 MiB of a frame (an entry "
                                     "over 4 MiB is cut into frames, with a seek table)",
                                     frames_.size() + 1, name, header.frameContentSize));
  if (header.dictID != 0 && !dictionary_)
    return damaged(diag, fmt::format("entry '{}' is compressed with zstd dictionary {}, the shard holds none", name,
                                     header.dictID));
  if (header.dictID != 0 && header.dictID != dictionary_->id())
    return damaged(diag, fmt::format("entry '{}' is compressed with zstd dictionary {}, the shard holds {}", name,
                                     header.dictID, dictionary_->id()));
  // A frame without a dictID was compressed without one: it gets none.
  ZSTD_DCtx_reset(dctx_.get(), ZSTD_reset_session_only);
  ZSTD_DCtx_refDDict(dctx_.get(), header.dictID != 0 ? dictionary_->get() : nullptr);
  phase_ = phase::frame;
  frame_ = {};
  const std::string header_bytes = std::move(head_);
  head_.clear();
  // A frame is longer than its header (a block header at least follows): this cannot end it.
  auto used = on_frame(header_bytes, buffer, out, diag);
  if (!used) return used.error();
  return {};
}

result<void> zstd_entry::start_table(std::uint64_t table_size, diagnostics& diag) {
  const auto name = printable_name(name_);
  if (read_u32(head_, 0) != seek_table_magic)
    return damaged(diag, fmt::format("entry '{}' holds a skippable zstd frame that is not a seek table", name));
  if (!seekable())
    return damaged(diag, fmt::format("entry '{}' of {} bytes has a zstd seek table (only an entry over 4 MiB is cut "
                                     "into frames)", name, size_));
  // Its size follows from the frames decoded before it: a table of any other size cannot agree, and is
  // never gathered.
  const auto expected = seek_record * frames_.size() + seek_footer;
  if (table_size != expected)
    return damaged(diag, fmt::format("the zstd seek table of entry '{}' is {} bytes; after its {} frames it would be {}",
                                     name, table_size, frames_.size(), expected));
  phase_ = phase::table;
  head_.clear();
  table_want_ = expected;
  return {};
}

result<std::size_t> zstd_entry::on_frame(std::string_view bytes, std::span<unsigned char> buffer, const output& out,
                                         diagnostics& diag) {
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  for (;;) {
    ZSTD_outBuffer o{buffer.data(), buffer.size(), 0};
    const auto in_before = in.pos;
    const std::size_t rc = ZSTD_decompressStream(dctx_.get(), &o, &in);
    if (ZSTD_isError(rc))
      return damaged(diag, fmt::format("entry '{}' does not decompress as zstd: {}", printable_name(name_),
                                       ZSTD_getErrorName(rc)));
    frame_.decompressed += o.pos;
    if (o.pos > 0) {
      if (auto r = out({reinterpret_cast<const char*>(buffer.data()), o.pos}); !r) return r.error();
    }
    // 0: the frame has ended and is flushed. zstd stops there: what follows is the next frame's.
    if (rc == 0) {
      frame_.compressed += in.pos;
      frames_.push_back(frame_);
      phase_ = phase::header;
      return in.pos;
    }
    // A full output buffer may hide more output; otherwise zstd has taken all the input it was given.
    if (o.pos < o.size && in.pos == in.size) break;
    if (o.pos == 0 && in.pos == in_before)
      return damaged(diag, fmt::format("entry '{}' does not decompress as zstd: no progress", printable_name(name_)));
  }
  frame_.compressed += in.pos;
  return in.pos;
}

std::size_t zstd_entry::on_table(std::string_view bytes) {
  const auto take = std::min(bytes.size(), table_want_ - head_.size());
  head_.append(bytes.substr(0, take));
  return take;
}

result<void> zstd_entry::check_table(diagnostics& diag) const {
  const auto name = printable_name(name_);
  const std::string_view table(head_);
  const auto footer = table.size() - seek_footer;
  if (read_u32(table, footer + 5) != seek_footer_magic)
    return damaged(diag, fmt::format("the zstd seek table of entry '{}' has no seekable-format footer", name));
  if (table[footer + 4] != 0)
    return damaged(diag, fmt::format("the zstd seek table of entry '{}' has descriptor {:#x}, not 0 (no checksums)",
                                     name, static_cast<unsigned char>(table[footer + 4])));
  if (read_u32(table, footer) != frames_.size())
    return damaged(diag, fmt::format("the zstd seek table of entry '{}' lists {} frames; the entry holds {}", name,
                                     read_u32(table, footer), frames_.size()));
  for (std::size_t i = 0; i < frames_.size(); ++i) {
    const auto compressed = read_u32(table, i * seek_record);
    const auto decompressed = read_u32(table, i * seek_record + 4);
    if (compressed != frames_[i].compressed || decompressed != frames_[i].decompressed)
      return damaged(diag, fmt::format("the zstd seek table of entry '{}' says frame {} is {} bytes from {}; it is {} "
                                       "from {}", name, i + 1, decompressed, compressed, frames_[i].decompressed,
                                       frames_[i].compressed));
  }
  return {};
}

result<void> zstd_entry::finish(diagnostics& diag) const {
  const auto name = printable_name(name_);
  if (phase_ == phase::frame || (phase_ == phase::header && !head_.empty()))
    return damaged(diag, fmt::format("entry '{}' ends inside a zstd frame", name));
  if (phase_ == phase::table)
    return damaged(diag, fmt::format("the zstd seek table of entry '{}' is truncated: the entry ends {} bytes into its "
                                     "{}", name, head_.size(), table_want_));
  if (frames_.empty()) return damaged(diag, fmt::format("entry '{}' holds no zstd frame", name));
  if (!seekable()) return {};
  const auto expected = (size_ + zstd_frame_size - 1) / zstd_frame_size;
  if (frames_.size() != expected)
    return damaged(diag, fmt::format("entry '{}' of {} bytes holds {} zstd frames, not {} of 4 MiB", name, size_,
                                     frames_.size(), expected));
  if (phase_ != phase::done)
    return damaged(diag, fmt::format("entry '{}' of {} bytes has no zstd seek table after its {} frames", name, size_,
                                     frames_.size()));
  return {};
}

}  // namespace ferry::agent::node
