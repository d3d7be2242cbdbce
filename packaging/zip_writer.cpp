#include "packaging/zip_writer.hpp"

#include "packaging/zip_deflate_backend.hpp"
#include "packaging/zip_zstd_backend.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <utility>

namespace ferry::packaging {
namespace {

// Lowercase, sorted for binary search. Formats whose payload is compressed (archives, wheels and zip-based
// documents, images, audio, video, fonts): compressing them again gains nothing.
constexpr std::array<std::string_view, 48> compressed_extensions = {
    "7z",   "aac",  "apk",  "avif", "br",   "bz2",  "docx", "egg",  "flac", "gif",   "gz",   "heic",
    "jar",  "jpeg", "jpg",  "lz",   "lz4",  "lzma", "m4a",  "m4v",  "mkv",  "mov",   "mp3",  "mp4",
    "npz",  "odp",  "ods",  "odt",  "ogg",  "opus", "png",  "pptx", "pyz",  "rar",   "tbz2", "tgz",
    "txz",  "war",  "webm", "webp", "whl",  "woff", "woff2", "xlsx", "xz",  "zip",   "zst",  "zstd",
};
static_assert(std::is_sorted(compressed_extensions.begin(), compressed_extensions.end()));

// result<bool> cannot be made from a bare error_code unambiguously (error_code converts to bool).
result<bool> as_error(error_code ec) { return {boost::system::in_place_error, ec}; }

std::unique_ptr<zip_backend> make_backend(const zip_options& options, zip_sink out) {
  if (options.codec == zip_codec::zstd) return std::make_unique<zip_zstd_backend>(options, std::move(out));
  return std::make_unique<zip_deflate_backend>(options.level, std::move(out));
}

}  // namespace

bool already_compressed(std::string_view path) {
  const auto dot = path.rfind('.');
  if (dot == std::string_view::npos) return false;
  const auto extension = path.substr(dot + 1);
  if (extension.find('/') != std::string_view::npos) return false;  // the dot was in a directory name
  std::array<char, 8> lower{};
  if (extension.empty() || extension.size() > lower.size()) return false;
  std::transform(extension.begin(), extension.end(), lower.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return std::binary_search(compressed_extensions.begin(), compressed_extensions.end(),
                            std::string_view(lower.data(), extension.size()));
}

zip_writer::zip_writer(const zip_options& options, sink out)
    : backend_(make_backend(options, std::move(out))), buffer_(read_chunk) {}

zip_writer::~zip_writer() = default;

result<void> zip_writer::add(const file_entry& entry, diagnostics& diag) {
  for (;;) {
    auto done = add_some(entry, std::numeric_limits<std::uint64_t>::max(), diag);
    if (!done) return done.error();
    if (*done) return {};
  }
}

result<bool> zip_writer::add_some(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag) {
  if (auto usable = check_usable(diag); !usable) return as_error(usable.error());
  try {
    auto r = add_step(entry, output_budget, diag);
    if (!r) return as_error(fail(r.error(), diag));
    return r;
  } catch (...) {
    // What the sink threw leaves here; the archive behind it is unusable.
    current_.reset();
    failed_ = make_error_code(sys::errc::io_error);
    failure_ = entry.path + ": zip: the output sink failed";
    throw;
  }
}

result<void> zip_writer::finish(diagnostics& diag) {
  if (auto usable = check_usable(diag); !usable) return usable;
  try {
    if (auto r = backend_->finish(diag); !r) return fail(r.error(), diag);
  } catch (...) {
    failed_ = make_error_code(sys::errc::io_error);
    failure_ = "zip: the output sink failed";
    throw;
  }
  finished_ = true;
  return {};
}

result<void> zip_writer::check_usable(diagnostics& diag) const {
  if (finished_) throw std::logic_error("zip_writer: used after finish()");
  if (failed_) {
    diag.set(failure_);
    return failed_;
  }
  return {};
}

result<bool> zip_writer::add_step(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag) {
  if (entry.type == file_entry::kind::symlink) {
    if (auto r = backend_->add_symlink(entry, diag); !r) return as_error(r.error());
    return true;
  }
  if (!current_) {
    auto opened = source_file::open(entry, diag);
    if (!opened) return as_error(opened.error());
    if (auto r = backend_->begin_file(entry, diag); !r) return as_error(r.error());
    current_.emplace(std::move(*opened));
  }
  return copy_some(output_budget, diag);
}

result<bool> zip_writer::copy_some(std::uint64_t output_budget, diagnostics& diag) {
  const auto out_at_start = bytes_out();
  for (;;) {
    auto piece = current_->read_some(buffer_, diag);
    if (!piece) {
      current_.reset();
      return as_error(piece.error());
    }
    if (piece->empty()) break;
    bytes_in_ += piece->size();
    if (auto r = backend_->write(*piece, diag); !r) {
      current_.reset();
      return as_error(r.error());
    }
    if (bytes_out() - out_at_start >= output_budget && current_->bytes_read() < current_->size()) return false;
  }
  current_.reset();
  if (auto r = backend_->end_file(diag); !r) return as_error(r.error());
  return true;
}

error_code zip_writer::fail(error_code ec, const diagnostics& diag) {
  failed_ = ec;
  failure_ = diag.message;
  return ec;
}

}  // namespace ferry::packaging
