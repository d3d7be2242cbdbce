#include "agent/node/zip_stream.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/zip_bytes.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>

namespace ferry::agent::node {
namespace {

constexpr std::uint32_t local_signature = 0x04034b50;
constexpr std::size_t local_header_size = 30;
constexpr std::size_t out_chunk = 256 << 10;

}  // namespace

void zip_stream::inflater_deleter::operator()(z_stream_s* z) const {
  inflateEnd(z);
  delete z;
}

zip_stream::zip_stream(std::vector<zip_entry> entries, std::uint64_t body_end)
    : entries_(std::move(entries)), body_end_(body_end), out_(out_chunk) {}

zip_stream::~zip_stream() = default;

error_code zip_stream::damaged(diagnostics& diag, std::string text) const {
  diag.set(std::move(text));
  return make_error_code(errc::bad_zip);
}

result<void> zip_stream::feed(std::string_view bytes, entry_sink& sink, diagnostics& diag) {
  if (bytes.size() > body_end_ - position_)
    return damaged(diag, fmt::format("the zip's body runs past its central directory at byte {}", body_end_));
  while (!bytes.empty()) {
    std::size_t used = 0;
    switch (state_) {
      case state::seek: {
        // Between entries: a data descriptor, or nothing. After the last entry, up to the directory.
        const auto target = index_ < entries_.size() ? entries_[index_].local_offset : body_end_;
        if (position_ > target)
          return damaged(diag, fmt::format("entry '{}' starts inside the one before it", printable_name(entries_[index_].name)));
        used = static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), target - position_));
        if (position_ + used == target && index_ < entries_.size()) {
          state_ = state::header;
          header_.clear();
          header_want_ = local_header_size;
        }
        break;
      }
      case state::header: {
        used = std::min(bytes.size(), header_want_ - header_.size());
        header_.append(bytes.substr(0, used));
        if (header_.size() < header_want_) break;
        if (header_want_ == local_header_size) {
          if (read_u32(header_, 0) != local_signature)
            return damaged(diag, fmt::format("entry '{}' has no local header at byte {}", printable_name(entries_[index_].name),
                                             entries_[index_].local_offset));
          header_want_ += read_u16(header_, 26) + read_u16(header_, 28);
          if (header_.size() < header_want_) break;
        }
        if (auto r = on_header(sink, diag); !r) return r;
        break;
      }
      case state::data: {
        auto r = on_data(bytes, sink, diag);
        if (!r) return r.error();
        used = *r;
        break;
      }
      case state::trailer: break;
    }
    position_ += used;
    bytes.remove_prefix(used);
    if (state_ == state::data && compressed_left_ == 0) {
      if (auto r = end_entry(sink, diag); !r) return r;
    }
  }
  return {};
}

result<void> zip_stream::on_header(entry_sink& sink, diagnostics& diag) {
  const auto& e = entries_[index_];
  const auto name_length = read_u16(header_, 26);
  if (std::string_view(header_).substr(local_header_size, name_length) != e.name)
    return damaged(diag, fmt::format("entry '{}' is named otherwise in its local header", printable_name(e.name)));
  if (read_u16(header_, 8) != e.method)
    return damaged(diag, fmt::format("entry '{}' has another method in its local header", printable_name(e.name)));
  const auto extra = std::string_view(header_).substr(local_header_size + name_length);
  if ((read_ferry_mark(extra) == ferry_mark::dictionary) != e.dictionary)
    return damaged(diag, fmt::format("entry '{}' is marked as the zstd dictionary in only one of its headers",
                                     printable_name(e.name)));
  const auto data_start = e.local_offset + header_want_;
  const auto limit = index_ + 1 < entries_.size() ? entries_[index_ + 1].local_offset : body_end_;
  if (data_start > limit || limit - data_start < e.compressed)
    return damaged(diag, fmt::format("entry '{}' runs into the next one", printable_name(e.name)));
  if (e.dictionary) {
    dictionary_bytes_.clear();
    dictionary_bytes_.reserve(static_cast<std::size_t>(e.size));  // at most 1 MiB (zip_directory)
  } else if (auto r = sink.begin(e, diag); !r) {
    return r;
  }
  compressed_left_ = e.compressed;
  produced_ = 0;
  crc_ = static_cast<std::uint32_t>(crc32(0, nullptr, 0));
  inflate_ended_ = false;
  if (e.method == 8) {
    if (!inflater_) {
      auto* z = new z_stream_s{};
      if (inflateInit2(z, -MAX_WBITS) != Z_OK) {
        delete z;
        throw std::bad_alloc();
      }
      inflater_.reset(z);
    } else {
      inflateReset(inflater_.get());
    }
  } else if (e.method == 93) {
    if (!zstd_) zstd_ = std::make_unique<zstd_entry>();
    zstd_->begin(e.name, e.size, dictionary_ ? &*dictionary_ : nullptr);
  }
  state_ = state::data;
  return {};
}

result<void> zip_stream::emit(std::string_view out, entry_sink& sink, diagnostics& diag) {
  const auto& e = entries_[index_];
  if (out.size() > e.size - produced_)
    return damaged(diag, fmt::format("entry '{}' inflates to more than its {} bytes", printable_name(e.name), e.size));
  produced_ += out.size();
  crc_ = static_cast<std::uint32_t>(
      crc32_z(crc_, reinterpret_cast<const unsigned char*>(out.data()), out.size()));
  if (e.dictionary) {
    dictionary_bytes_.append(out);
    return {};
  }
  return sink.data(out, diag);
}

result<std::size_t> zip_stream::on_data(std::string_view bytes, entry_sink& sink, diagnostics& diag) {
  const auto& e = entries_[index_];
  const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), compressed_left_));
  if (e.method == 0) {
    if (auto r = emit(bytes.substr(0, take), sink, diag); !r) return r.error();
    compressed_left_ -= take;
    return take;
  }
  return e.method == 93 ? on_zstd(bytes.substr(0, take), sink, diag) : on_inflate(bytes.substr(0, take), sink, diag);
}

result<std::size_t> zip_stream::on_zstd(std::string_view bytes, entry_sink& sink, diagnostics& diag) {
  const auto out = [&](std::string_view made) { return emit(made, sink, diag); };
  if (auto r = zstd_->feed(bytes, out_, out, diag); !r) return r.error();
  compressed_left_ -= bytes.size();
  return bytes.size();
}

result<std::size_t> zip_stream::on_inflate(std::string_view bytes, entry_sink& sink, diagnostics& diag) {
  const auto& e = entries_[index_];
  const auto take = bytes.size();
  auto* z = inflater_.get();
  z->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z->avail_in = static_cast<uInt>(std::min<std::size_t>(take, 1u << 30));
  const auto offered = z->avail_in;
  for (;;) {
    if (inflate_ended_) {
      if (z->avail_in > 0) return damaged(diag, fmt::format("entry '{}' has bytes after its deflate stream", printable_name(e.name)));
      break;
    }
    z->next_out = out_.data();
    z->avail_out = static_cast<uInt>(out_.size());
    const int rc = inflate(z, Z_NO_FLUSH);
    const std::size_t made = out_.size() - z->avail_out;
    if (rc == Z_BUF_ERROR && made == 0) break;  // no progress possible: it wants more input
    if (rc != Z_OK && rc != Z_STREAM_END)
      return damaged(diag, fmt::format("entry '{}' does not inflate: {}", printable_name(e.name), z->msg ? z->msg : "bad data"));
    if (made > 0) {
      if (auto r = emit({reinterpret_cast<const char*>(out_.data()), made}, sink, diag); !r) return r.error();
    }
    if (rc == Z_STREAM_END) {
      inflate_ended_ = true;
      continue;
    }
    // A full output buffer may hide more output; otherwise inflate stopped for want of input.
    if (z->avail_out != 0 && z->avail_in == 0) break;
  }
  const std::size_t used = offered - z->avail_in;
  compressed_left_ -= used;
  return used;
}

result<void> zip_stream::end_entry(entry_sink& sink, diagnostics& diag) {
  const auto& e = entries_[index_];
  if (e.method == 8 && !inflate_ended_)
    return damaged(diag, fmt::format("entry '{}' ends before its deflate stream does", printable_name(e.name)));
  if (e.method == 93) {
    if (auto r = zstd_->finish(diag); !r) return r;
  }
  if (produced_ != e.size)
    return damaged(diag, fmt::format("entry '{}' holds {} bytes, not the {} its directory says", printable_name(e.name), produced_,
                                     e.size));
  if (crc_ != e.crc32) return damaged(diag, fmt::format("entry '{}' fails its CRC-32 check", printable_name(e.name)));
  if (e.dictionary) {
    if (auto r = end_dictionary(diag); !r) return r;
  } else if (auto r = sink.end(diag); !r) {
    return r;
  }
  ++done_;
  ++index_;
  state_ = state::seek;
  return {};
}

result<void> zip_stream::end_dictionary(diagnostics& diag) {
  auto loaded = zstd_dictionary::load(dictionary_bytes_, entries_[index_].name, diag);
  if (!loaded) return loaded.error();
  dictionary_.emplace(std::move(*loaded));
  // The DDict holds its own copy.
  std::string().swap(dictionary_bytes_);
  return {};
}

result<void> zip_stream::finish(diagnostics& diag) const {
  if (done_ < entries_.size())
    return damaged(diag, fmt::format("the zip ends inside entry '{}'", printable_name(entries_[index_].name)));
  if (position_ != body_end_)
    return damaged(diag, fmt::format("the zip ends at byte {}, before its central directory at {}", position_,
                                     body_end_));
  return {};
}

}  // namespace ferry::agent::node
