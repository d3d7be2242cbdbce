#pragma once
// The deflate backend of zip_writer (packaging.codec "deflate"): zips that unzip and Python's zipfile read.
//
// Built on libarchive's zip writer. What that gives (libarchive 3.6.2):
//   - deflate at a chosen level (zip option "compression-level"), or store, switchable between entries;
//   - Zip64 when an entry or the archive passes 4 GiB;
//   - the mode in the external attributes (Info-ZIP style), which unzip and Python read back;
//   - a data descriptor after every regular file (the CRC is only known at the end), which every reader takes.
// What it needs help with, done here:
//   - it stamps the DOS time from localtime(mtime): we leave mtime unset (0), which is before 1980 in every
//     time zone and so clamps to 1980-01-01 00:00:00; the "UT" extra field it always writes then carries no
//     time at all, and the "ux" field carries uid/gid 0;
//   - it sets the UTF-8 name flag (bit 11) when the name is not ASCII and nl_langinfo(CODESET) is "UTF-8":
//     we switch this thread's locale around each such header so the flag follows the name's bytes instead.
// libarchive cannot write ZIP method 93 (zstd): that is zip_zstd_backend's.
#include "packaging/zip_backend.hpp"

#include <exception>
#include <memory>

struct archive;
struct archive_entry;

namespace ferry::packaging {

class zip_deflate_backend final : public zip_backend {
 public:

  // `level`: deflate 1..9, 0 = store everything.
  zip_deflate_backend(int level, zip_sink out);
  ~zip_deflate_backend() override;

  result<void> add_symlink(const file_entry& entry, diagnostics& diag) override;
  result<void> begin_file(const file_entry& entry, diagnostics& diag) override;
  result<void> write(std::string_view content, diagnostics& diag) override;
  result<void> end_file(diagnostics&) override { return {}; }
  result<void> finish(diagnostics& diag) override;
  std::uint64_t bytes_out() const override { return bytes_out_; }

 private:
  struct archive_deleter {
    void operator()(archive* a) const;
  };
  struct entry_deleter {
    void operator()(archive_entry* e) const;
  };

  static long on_write(archive* a, void* self, const void* bytes, std::size_t size);

  result<void> write_header(const file_entry& entry, diagnostics& diag);
  // Turns a libarchive failure into a result, or rethrows what the sink threw.
  result<void> archive_failure(const file_entry* entry, diagnostics& diag);

  int level_;
  zip_sink out_;
  std::unique_ptr<archive, archive_deleter> archive_;
  std::unique_ptr<archive_entry, entry_deleter> entry_;  // reused: cleared and refilled per entry
  const file_entry* current_ = nullptr;                  // the regular file being written
  std::uint64_t bytes_out_ = 0;
  std::exception_ptr sink_error_;
  error_code setup_failed_;
  std::string setup_failure_;
  bool finished_ = false;
  bool discard_ = false;  // abandoning: output goes nowhere
};

}  // namespace ferry::packaging
