#include "packaging/zip_writer.hpp"

#include "packaging/file_hash.hpp"
#include "packaging/file_stat.hpp"

#include "packaging/error.hpp"
#include "packaging/unique_fd.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <locale.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <new>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <limits>
#include <utility>

namespace ferry::packaging {
namespace {

static_assert(std::is_same_v<la_ssize_t, long>, "zip_writer::on_write must match archive_write_callback");

// Lowercase, sorted for binary search. Formats whose payload is compressed (archives, wheels and zip-based
// documents, images, audio, video, fonts): deflate gains nothing on them.
constexpr std::array<std::string_view, 48> compressed_extensions = {
    "7z",   "aac",  "apk",  "avif", "br",   "bz2",  "docx", "egg",  "flac", "gif",   "gz",   "heic",
    "jar",  "jpeg", "jpg",  "lz",   "lz4",  "lzma", "m4a",  "m4v",  "mkv",  "mov",   "mp3",  "mp4",
    "npz",  "odp",  "ods",  "odt",  "ogg",  "opus", "png",  "pptx", "pyz",  "rar",   "tbz2", "tgz",
    "txz",  "war",  "webm", "webp", "whl",  "woff", "woff2", "xlsx", "xz",  "zip",   "zst",  "zstd",
};
static_assert(std::is_sorted(compressed_extensions.begin(), compressed_extensions.end()));

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF (what readers will decode).
bool is_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  while (p < end) {
    const unsigned lead = *p;
    std::size_t extra = 0;
    std::uint32_t code = 0, smallest = 0;
    if (lead < 0x80) {
      ++p;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1, code = lead & 0x1F, smallest = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2, code = lead & 0x0F, smallest = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3, code = lead & 0x07, smallest = 0x10000;
    } else {
      return false;
    }
    if (static_cast<std::size_t>(end - p) <= extra) return false;
    for (std::size_t i = 1; i <= extra; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      code = (code << 6) | (p[i] & 0x3F);
    }
    if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    p += extra + 1;
  }
  return true;
}

// libarchive flags a non-ASCII name as UTF-8 exactly when nl_langinfo(CODESET) is "UTF-8" while it writes
// the header, and glibc answers that from the calling thread's locale. These two locales (made once, shared
// read-only by every thread) let each header get the flag its name deserves, whatever the process locale.
locale_t make_utf8_ctype() {
  for (const char* name : {"C.UTF-8", "C.utf8", "en_US.UTF-8"}) {
    if (const locale_t l = ::newlocale(LC_CTYPE_MASK, name, locale_t{}); l) return l;
  }
  return locale_t{};  // none installed: the flag then follows the process locale
}

locale_t utf8_ctype() {
  static const locale_t l = make_utf8_ctype();
  return l;
}

locale_t ascii_ctype() {
  static const locale_t l = ::newlocale(LC_CTYPE_MASK, "C", locale_t{});
  return l;
}

// The locale to write `name`'s header under, or null when any locale will do (ASCII is never flagged).
locale_t header_locale(std::string_view name) {
  if (is_ascii(name)) return locale_t{};
  return is_utf8(name) ? utf8_ctype() : ascii_ctype();
}

class scoped_thread_locale {
 public:
  explicit scoped_thread_locale(locale_t l) : previous_(l ? ::uselocale(l) : locale_t{}) {}
  ~scoped_thread_locale() {
    if (previous_) ::uselocale(previous_);
  }
  scoped_thread_locale(const scoped_thread_locale&) = delete;
  scoped_thread_locale& operator=(const scoped_thread_locale&) = delete;

 private:
  locale_t previous_;
};

// result<bool> cannot be made from a bare error_code unambiguously (error_code converts to bool).
result<bool> as_error(const result<void>& failed) { return {boost::system::in_place_error, failed.error()}; }

std::string errno_text(int e) { return std::generic_category().message(e); }

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

void zip_writer::archive_deleter::operator()(archive* a) const {
  // A failed archive is freed without being closed, so an unfinished zip never gets a central directory.
  ::archive_write_fail(a);
  ::archive_write_free(a);
}

void zip_writer::entry_deleter::operator()(archive_entry* e) const { ::archive_entry_free(e); }

zip_writer::zip_writer(const zip_options& options, sink out)
    : options_(options), out_(std::move(out)), buffer_(read_chunk) {
  open();
}

zip_writer::~zip_writer() {
  if (current_fd_ >= 0) ::close(current_fd_);
  if (archive_ && !finished_) {
    // libarchive frees a failed archive without ending the entry's deflate stream (a leak): close it
    // first, with every byte of the unwanted central directory dropped before it reaches the sink.
    discard_ = true;
    ::archive_write_close(archive_.get());
  }
}

void zip_writer::open() {
  archive_.reset(::archive_write_new());
  entry_.reset(::archive_entry_new());
  if (!archive_ || !entry_) throw std::bad_alloc();
  auto* a = archive_.get();
  // "compression-level" 0 means store everything; 1..9 deflate at that level (3.6.2 has it).
  const auto level = std::to_string(std::clamp(options_.level, 0, 9));
  const bool ok = ::archive_write_set_format_zip(a) == ARCHIVE_OK &&
                  ::archive_write_set_format_option(a, "zip", "compression-level", level.c_str()) == ARCHIVE_OK &&
                  ::archive_write_set_bytes_per_block(a, static_cast<int>(output_block)) == ARCHIVE_OK &&
                  // No padding after the end of central directory: the zip ends where its data does.
                  ::archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
                  ::archive_write_open2(a, this, nullptr, &zip_writer::on_write, nullptr, nullptr) == ARCHIVE_OK;
  if (!ok) {
    failed_ = make_error_code(sys::errc::not_supported);
    failure_ = fmt::format("zip: cannot set up libarchive's zip writer: {}",
                           ::archive_error_string(a) ? ::archive_error_string(a) : "unknown error");
  }
}

long zip_writer::on_write(archive*, void* self, const void* bytes, std::size_t size) {
  auto& writer = *static_cast<zip_writer*>(self);
  if (writer.discard_) return static_cast<long>(size);
  // An exception must not unwind through libarchive's C frames: keep it for add()/finish() to rethrow.
  try {
    writer.out_({static_cast<const char*>(bytes), size});
  } catch (...) {
    writer.sink_error_ = std::current_exception();
    return -1;
  }
  writer.bytes_out_ += size;
  return static_cast<long>(size);
}

result<void> zip_writer::add(const file_entry& entry, diagnostics& diag) {
  for (;;) {
    auto done = add_some(entry, std::numeric_limits<std::uint64_t>::max(), diag);
    if (!done) return done.error();
    if (*done) return {};
  }
}

result<bool> zip_writer::add_some(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag) {
  if (auto usable = check_usable(diag); !usable) return as_error(usable);
  if (entry.type == file_entry::kind::symlink) {
    if (auto r = add_symlink(entry, diag); !r) return as_error(r);
    return true;
  }
  if (current_fd_ < 0) {
    if (auto r = begin_regular(entry, diag); !r) return as_error(r);
  }
  return copy_some(entry, output_budget, diag);
}

result<void> zip_writer::finish(diagnostics& diag) {
  if (auto usable = check_usable(diag); !usable) return usable;
  if (::archive_write_close(archive_.get()) != ARCHIVE_OK) return archive_failure(nullptr, diag);
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

result<void> zip_writer::add_symlink(const file_entry& entry, diagnostics& diag) {
  // libarchive writes the target as the entry's (stored) content, which is how unzip recognises links.
  return write_header(entry, diag);
}

result<void> zip_writer::begin_regular(const file_entry& entry, diagnostics& diag) {
  unique_fd fd(open_for_reading(entry.source));
  if (fd.get() < 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
      return fail(errc::file_changed, fmt::format("{}: {} vanished after it was hashed", entry.path,
                                                  entry.source), diag);
    }
    return fail(errc::unreadable_file,
                fmt::format("{}: cannot open {}: {}", entry.path, entry.source, errno_text(e)), diag);
  }
  if (auto same = check_unchanged(fd.get(), entry, diag); !same) return same;
  if (entry.content_size() > read_chunk) {
    ::posix_fadvise(fd.get(), static_cast<off_t>(entry.piece_offset), static_cast<off_t>(entry.piece_length),
                    POSIX_FADV_SEQUENTIAL);
  }
  if (entry.is_piece() && ::lseek(fd.get(), static_cast<off_t>(entry.piece_offset), SEEK_SET) < 0) {
    return fail(errc::unreadable_file,
                fmt::format("{}: cannot seek in {}: {}", entry.path, entry.source, errno_text(errno)), diag);
  }
  if (auto header = write_header(entry, diag); !header) return header;
  current_fd_ = fd.release();
  current_read_ = 0;
  return {};
}

result<void> zip_writer::check_unchanged(int fd, const file_entry& entry, diagnostics& diag) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return fail(errc::unreadable_file,
                fmt::format("{}: cannot stat {}: {}", entry.path, entry.source, errno_text(errno)), diag);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(errc::unreadable_file,
                fmt::format("{}: {} is not a regular file", entry.path, entry.source), diag);
  }
  if (const auto what = difference(st, entry.key); !what.empty()) {
    return fail(errc::file_changed,
                fmt::format("{}: {} changed after it was hashed: {}", entry.path, entry.source, what),
                diag);
  }
  return {};
}

result<bool> zip_writer::copy_some(const file_entry& entry, std::uint64_t output_budget, diagnostics& diag) {
  // The descriptor is closed on every way out but "more to come".
  struct close_unless_kept {
    int& fd;
    bool keep = false;
    ~close_unless_kept() {
      if (!keep && fd >= 0) {
        ::close(fd);
        fd = -1;
      }
    }
  } guard{current_fd_};
  const auto out_at_start = bytes_out_;
  // Read to end of file rather than to key.size: a file that grew is noticed here, before its extra
  // bytes reach the zip (libarchive would silently cut them off at the size in the header). A piece
  // reads exactly its bytes; the fstat at its end notices a file that changed.
  const auto want = entry.content_size();
  for (;;) {
    const auto room = entry.is_piece() ? std::min<std::uint64_t>(buffer_.size(), want - current_read_)
                                       : buffer_.size();
    if (room == 0) break;
    const auto n = ::read(current_fd_, buffer_.data(), static_cast<std::size_t>(room));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return as_error(fail(errc::unreadable_file,
                  fmt::format("{}: cannot read {}: {}", entry.path, entry.source, errno_text(errno)), diag));
    }
    if (n == 0) break;
    current_read_ += static_cast<std::uint64_t>(n);
    bytes_in_ += static_cast<std::uint64_t>(n);
    if (current_read_ > entry.key.size) {
      return as_error(fail(errc::file_changed,
                  fmt::format("{}: {} grew past its hashed size of {} bytes", entry.path, entry.source,
                              entry.key.size), diag));
    }
    if (::archive_write_data(archive_.get(), buffer_.data(), static_cast<std::size_t>(n)) != n) {
      return as_error(archive_failure(&entry, diag));
    }
    if (bytes_out_ - out_at_start >= output_budget && current_read_ < want) {
      guard.keep = true;
      return false;
    }
  }
  if (current_read_ != want) {
    return as_error(fail(errc::file_changed,
                fmt::format("{}: {} shrank from {} to {} bytes while being zipped", entry.path,
                            entry.source, entry.key.size, entry.piece_offset + current_read_), diag));
  }
  // Catches rewrites that kept the size but not the mtime, and growth after the last read.
  if (auto same = check_unchanged(current_fd_, entry, diag); !same) return as_error(same);
  return true;
}

result<void> zip_writer::write_header(const file_entry& entry, diagnostics& diag) {
  auto* a = archive_.get();
  auto* e = entry_.get();
  // Only what the zip should depend on: no times (see the header comment), owner 0, no owner names.
  ::archive_entry_clear(e);
  ::archive_entry_copy_pathname(e, entry.path.c_str());  // raw bytes: libarchive converts nothing on Linux
  ::archive_entry_set_mode(e, entry.mode());
  ::archive_entry_set_uid(e, 0);
  ::archive_entry_set_gid(e, 0);
  if (entry.type == file_entry::kind::symlink) {
    ::archive_entry_copy_symlink(e, entry.link_target.c_str());
  } else {
    ::archive_entry_set_size(e, static_cast<la_int64_t>(entry.content_size()));
    if (options_.level > 0) {
      // Empty files are stored too: deflate would turn 0 bytes into 2.
      const bool store = entry.content_size() == 0 || already_compressed(entry.path);
      const int set = store ? ::archive_write_zip_set_compression_store(a)
                            : ::archive_write_zip_set_compression_deflate(a);
      if (set != ARCHIVE_OK) return archive_failure(&entry, diag);
    }
  }
  // libarchive calls localtime() (not localtime_r) for the DOS time: with mtime 0 every thread gets the
  // same answer, so writers running side by side on a pool still agree.
  const scoped_thread_locale locale(header_locale(entry.path));
  if (::archive_write_header(a, e) != ARCHIVE_OK) return archive_failure(&entry, diag);
  return {};
}

result<void> zip_writer::archive_failure(const file_entry* entry, diagnostics& diag) {
  const std::string where = entry ? entry->path + ": " : std::string();
  if (sink_error_) {
    failed_ = make_error_code(sys::errc::io_error);
    failure_ = where + "zip: the output sink failed";
    std::rethrow_exception(std::exchange(sink_error_, nullptr));
  }
  const int e = ::archive_errno(archive_.get());
  const char* text = ::archive_error_string(archive_.get());
  return fail(e > 0 ? error_code(e, sys::system_category()) : make_error_code(sys::errc::io_error),
              where + "zip: " + (text ? text : "libarchive failed"), diag);
}

result<void> zip_writer::fail(error_code ec, std::string message, diagnostics& diag) {
  failed_ = ec;
  failure_ = message;
  diag.set(std::move(message));
  return ec;
}

}  // namespace ferry::packaging
