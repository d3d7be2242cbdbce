#include "packaging/zip_zstd_backend.hpp"

#include "packaging/zip_name.hpp"
#include "packaging/zip_writer.hpp"

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <new>
#include <stdexcept>

namespace ferry::packaging {
namespace {

using zstd_layout::seek_footer_magic;
using zstd_layout::seek_table_magic;

std::uint16_t name_flags(std::string_view name) {
  return wants_utf8_flag(name) ? zip_records::flag_utf8 : 0;
}

// The most a regular file's data can take: every frame at zstd's bound, and the seek table.
std::uint64_t data_bound(std::uint64_t size, bool stored) {
  if (stored) return size;
  const auto frames = std::max<std::uint64_t>(1, (size + zip_zstd_backend::frame_size - 1) / zip_zstd_backend::frame_size);
  return frames * (ZSTD_compressBound(zip_zstd_backend::frame_size) + 8) + 17;
}

}  // namespace

void zip_zstd_backend::cctx_deleter::operator()(ZSTD_CCtx_s* c) const { ZSTD_freeCCtx(c); }
void zip_zstd_backend::cdict_deleter::operator()(ZSTD_CDict_s* d) const { ZSTD_freeCDict(d); }

zip_zstd_backend::zip_zstd_backend(const zip_options& options, zip_sink out)
    : level_(std::clamp(options.zstd_level, 1, ZSTD_maxCLevel())),
      dictionary_(options.dictionary),
      out_(std::move(out)),
      cctx_(ZSTD_createCCtx()),
      zstd_out_(ZSTD_CStreamOutSize()) {
  if (!cctx_) throw std::bad_alloc();
  // Deterministic output: one thread, no checksum (the entry's CRC-32 covers it), the content size in
  // every frame header.
  auto* c = cctx_.get();
  if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level_)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, 0)))
    throw std::logic_error("zip_zstd_backend: libzstd refused a basic parameter");
  if (!dictionary_.empty()) {
    cdict_.reset(ZSTD_createCDict(dictionary_.data(), dictionary_.size(), level_));
    if (!cdict_) throw std::bad_alloc();
  }
  block_.reserve(zip_output_block);
}

zip_zstd_backend::~zip_zstd_backend() = default;  // unfinished: the sink never sees a central directory

result<void> zip_zstd_backend::add_symlink(const file_entry& entry, diagnostics&) {
  start();
  zip_records::entry e;
  e.name = entry.path;
  e.flags = name_flags(entry.path);
  e.mode = entry.mode();
  add_known(std::move(e), entry.link_target);
  return {};
}

void zip_zstd_backend::start() {
  if (started_) return;
  started_ = true;
  if (dictionary_.empty()) return;
  zip_records::entry e;
  e.name = std::string(dictionary_name);
  e.mode = 0100444;
  e.dictionary = true;
  add_known(std::move(e), dictionary_);
}

void zip_zstd_backend::add_known(zip_records::entry e, std::string_view content) {
  e.method = 0;
  e.crc = static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(content.data()), content.size()));
  e.size = e.compressed = content.size();
  e.offset = offset_;
  e.zip64_local = false;  // a symlink's target or a dictionary: far below 4 GiB
  std::string header;
  zip_records::append_local_header(header, e);
  emit(header);
  emit(content);
  directory_.push_back(std::move(e));
}

result<void> zip_zstd_backend::begin_file(const file_entry& entry, diagnostics& diag) {
  start();
  const auto size = entry.content_size();
  const bool stored = size == 0 || already_compressed(entry.path);
  zip_records::entry e;
  e.name = entry.path;
  e.method = stored ? 0 : 93;
  e.flags = static_cast<std::uint16_t>(name_flags(entry.path) | zip_records::flag_descriptor);
  e.mode = entry.mode();
  e.size = size;
  e.offset = offset_;
  e.zip64_local = std::max(size, data_bound(size, stored)) >= zip_records::u32_max;
  e.crc = static_cast<std::uint32_t>(crc32_z(0, nullptr, 0));
  std::string header;
  zip_records::append_local_header(header, e);
  emit(header);
  directory_.push_back(std::move(e));
  entry_start_ = offset_;
  written_ = 0;
  frame_left_ = 0;
  frames_.clear();
  if (stored) return {};
  // Small files take the dictionary (when the shard has one); a null CDict returns to no dictionary.
  ZSTD_CCtx_reset(cctx_.get(), ZSTD_reset_session_only);
  const auto* dict = size < dictionary_file_limit ? cdict_.get() : nullptr;
  if (auto rc = ZSTD_CCtx_refCDict(cctx_.get(), dict); ZSTD_isError(rc)) return zstd_failure(rc, diag);
  return {};
}

result<void> zip_zstd_backend::write(std::string_view content, diagnostics& diag) {
  auto& e = directory_.back();
  e.crc = static_cast<std::uint32_t>(crc32_z(e.crc, reinterpret_cast<const Bytef*>(content.data()), content.size()));
  if (e.method == 0) {
    emit(content);
    written_ += content.size();
    return {};
  }
  while (!content.empty()) {
    if (frame_left_ == 0) {
      if (auto r = begin_frame(diag); !r) return r;
    }
    const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(content.size(), frame_left_));
    frame_left_ -= take;
    written_ += take;
    if (auto r = compress(content.substr(0, take), frame_left_ == 0, diag); !r) return r;
    content.remove_prefix(take);
  }
  return {};
}

result<void> zip_zstd_backend::begin_frame(diagnostics& diag) {
  const auto size = directory_.back().size;
  frame_left_ = std::min(frame_size, size - written_);
  frame_start_ = offset_;
  // Each frame stands alone: a new session (the parameters and the dictionary stay), its size pledged.
  ZSTD_CCtx_reset(cctx_.get(), ZSTD_reset_session_only);
  if (auto rc = ZSTD_CCtx_setPledgedSrcSize(cctx_.get(), frame_left_); ZSTD_isError(rc)) return zstd_failure(rc, diag);
  return {};
}

result<void> zip_zstd_backend::compress(std::string_view input, bool end, diagnostics& diag) {
  ZSTD_inBuffer in{input.data(), input.size(), 0};
  const auto mode = end ? ZSTD_e_end : ZSTD_e_continue;
  for (;;) {
    ZSTD_outBuffer out{zstd_out_.data(), zstd_out_.size(), 0};
    const auto left = ZSTD_compressStream2(cctx_.get(), &out, &in, mode);
    if (ZSTD_isError(left)) return zstd_failure(left, diag);
    emit({zstd_out_.data(), out.pos});
    // Done when every input byte is taken (zstd may keep some output for later) or, at a frame's end,
    // when the frame is out whole.
    if (end ? left == 0 : in.pos == in.size) break;
  }
  if (end) {
    const auto uncompressed = written_ - static_cast<std::uint64_t>(frames_.size()) * frame_size;
    frames_.emplace_back(static_cast<std::uint32_t>(offset_ - frame_start_), static_cast<std::uint32_t>(uncompressed));
  }
  return {};
}

result<void> zip_zstd_backend::end_file(diagnostics& diag) {
  auto& e = directory_.back();
  if (written_ != e.size)
    throw std::logic_error(fmt::format("zip_zstd_backend: {} got {} of its {} bytes", e.name, written_, e.size));
  if (e.method == 93 && frames_.empty()) {
    // Cannot happen (empty files are stored), but a zstd entry must hold at least one frame.
    if (auto r = begin_frame(diag); !r) return r;
    if (auto r = compress({}, true, diag); !r) return r;
  }
  if (frames_.size() > 1) write_seek_table();
  e.compressed = offset_ - entry_start_;
  std::string descriptor;
  zip_records::append_data_descriptor(descriptor, e);
  emit(descriptor);
  return {};
}

void zip_zstd_backend::write_seek_table() {
  std::string table;
  zip_records::put32(table, seek_table_magic);
  zip_records::put32(table, static_cast<std::uint32_t>(zstd_layout::seek_record * frames_.size() + zstd_layout::seek_footer));
  for (const auto& [compressed, decompressed] : frames_) {
    zip_records::put32(table, compressed);
    zip_records::put32(table, decompressed);
  }
  zip_records::put32(table, static_cast<std::uint32_t>(frames_.size()));
  table.push_back('\0');  // descriptor: no checksums
  zip_records::put32(table, seek_footer_magic);
  emit(table);
}

result<void> zip_zstd_backend::finish(diagnostics&) {
  start();
  const auto directory_offset = offset_;
  std::string records;
  for (const auto& e : directory_) {
    zip_records::append_central_header(records, e);
    if (records.size() >= zip_output_block) {
      emit(records);
      records.clear();
    }
  }
  emit(records);
  records.clear();
  zip_records::append_end_records(records, directory_.size(), directory_offset, offset_ - directory_offset);
  emit(records);
  flush();
  return {};
}

void zip_zstd_backend::emit(std::string_view bytes) {
  offset_ += bytes.size();
  // The sink sees whole blocks (the last one shorter), however large a piece: a stored file is no exception.
  while (!bytes.empty()) {
    const auto take = std::min(bytes.size(), zip_output_block - block_.size());
    block_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    if (block_.size() == zip_output_block) flush();
  }
}

void zip_zstd_backend::flush() {
  if (block_.empty()) return;
  out_(block_);
  bytes_out_ += block_.size();
  block_.clear();
}

error_code zip_zstd_backend::zstd_failure(std::size_t code, diagnostics& diag) const {
  const auto& name = directory_.empty() ? std::string("zip") : directory_.back().name;
  diag.set(fmt::format("{}: zstd: {}", name, ZSTD_getErrorName(code)));
  return make_error_code(sys::errc::io_error);
}

}  // namespace ferry::packaging
