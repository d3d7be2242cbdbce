#include "packaging/zip_deflate_backend.hpp"

#include "packaging/zip_name.hpp"
#include "packaging/zip_writer.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <locale.h>

#include <algorithm>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

namespace ferry::packaging {
namespace {

static_assert(std::is_same_v<la_ssize_t, long>, "zip_deflate_backend::on_write must match archive_write_callback");

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

}  // namespace

void zip_deflate_backend::archive_deleter::operator()(archive* a) const {
  // A failed archive is freed without being closed, so an unfinished zip never gets a central directory.
  ::archive_write_fail(a);
  ::archive_write_free(a);
}

void zip_deflate_backend::entry_deleter::operator()(archive_entry* e) const { ::archive_entry_free(e); }

zip_deflate_backend::zip_deflate_backend(int level, zip_sink out) : level_(level), out_(std::move(out)) {
  archive_.reset(::archive_write_new());
  entry_.reset(::archive_entry_new());
  if (!archive_ || !entry_) throw std::bad_alloc();
  auto* a = archive_.get();
  // "compression-level" 0 means store everything; 1..9 deflate at that level (3.6.2 has it).
  const auto text = std::to_string(std::clamp(level_, 0, 9));
  const bool ok = ::archive_write_set_format_zip(a) == ARCHIVE_OK &&
                  ::archive_write_set_format_option(a, "zip", "compression-level", text.c_str()) == ARCHIVE_OK &&
                  ::archive_write_set_bytes_per_block(a, static_cast<int>(zip_output_block)) == ARCHIVE_OK &&
                  // No padding after the end of central directory: the zip ends where its data does.
                  ::archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
                  ::archive_write_open2(a, this, nullptr, &zip_deflate_backend::on_write, nullptr, nullptr) ==
                      ARCHIVE_OK;
  if (!ok) {
    setup_failed_ = make_error_code(sys::errc::not_supported);
    setup_failure_ = fmt::format("zip: cannot set up libarchive's zip writer: {}",
                                 ::archive_error_string(a) ? ::archive_error_string(a) : "unknown error");
  }
}

zip_deflate_backend::~zip_deflate_backend() {
  if (archive_ && !finished_) {
    // libarchive frees a failed archive without ending the entry's deflate stream (a leak): close it
    // first, with every byte of the unwanted central directory dropped before it reaches the sink.
    discard_ = true;
    ::archive_write_close(archive_.get());
  }
}

long zip_deflate_backend::on_write(archive*, void* self, const void* bytes, std::size_t size) {
  auto& backend = *static_cast<zip_deflate_backend*>(self);
  if (backend.discard_) return static_cast<long>(size);
  // An exception must not unwind through libarchive's C frames: keep it for the caller to rethrow.
  try {
    backend.out_({static_cast<const char*>(bytes), size});
  } catch (...) {
    backend.sink_error_ = std::current_exception();
    return -1;
  }
  backend.bytes_out_ += size;
  return static_cast<long>(size);
}

result<void> zip_deflate_backend::add_symlink(const file_entry& entry, diagnostics& diag) {
  // libarchive writes the target as the entry's (stored) content, which is how unzip recognises links.
  return write_header(entry, diag);
}

result<void> zip_deflate_backend::begin_file(const file_entry& entry, diagnostics& diag) {
  current_ = &entry;
  return write_header(entry, diag);
}

result<void> zip_deflate_backend::write(std::string_view content, diagnostics& diag) {
  const auto n = static_cast<la_ssize_t>(content.size());
  if (::archive_write_data(archive_.get(), content.data(), content.size()) != n) return archive_failure(current_, diag);
  return {};
}

result<void> zip_deflate_backend::finish(diagnostics& diag) {
  if (setup_failed_) {
    diag.set(setup_failure_);
    return setup_failed_;
  }
  if (::archive_write_close(archive_.get()) != ARCHIVE_OK) return archive_failure(nullptr, diag);
  finished_ = true;
  return {};
}

result<void> zip_deflate_backend::write_header(const file_entry& entry, diagnostics& diag) {
  if (setup_failed_) {
    diag.set(setup_failure_);
    return setup_failed_;
  }
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
    if (level_ > 0) {
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

result<void> zip_deflate_backend::archive_failure(const file_entry* entry, diagnostics& diag) {
  if (sink_error_) std::rethrow_exception(std::exchange(sink_error_, nullptr));
  const std::string where = entry ? entry->path + ": " : std::string();
  const int e = ::archive_errno(archive_.get());
  const char* text = ::archive_error_string(archive_.get());
  diag.set(where + "zip: " + (text ? text : "libarchive failed"));
  return e > 0 ? error_code(e, sys::system_category()) : make_error_code(sys::errc::io_error);
}

}  // namespace ferry::packaging
