#pragma once
// What zip_writer (the facade every caller sees) asks of a container format: a symlink entry, a regular
// file's header, its content in pieces and its end, then the central directory. The facade reads the files
// (source_file.hpp), keeps the output budget and marks the writer unusable after a failure; a backend only
// encodes, and sends its bytes to the sink in order. Backends: zip_deflate_backend (libarchive, method 8)
// and zip_zstd_backend (ferry's own container, method 93).
#include "packaging/file_entry.hpp"
#include "tracing/diagnostics.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace ferry::packaging {

using zip_sink = std::function<void(std::string_view bytes)>;

// How much output a backend gathers before the sink sees it (the sink sees whole blocks, the last shorter).
inline constexpr std::size_t zip_output_block = 128 << 10;

class zip_backend {
 public:
  virtual ~zip_backend() = default;  // an unfinished archive gets no central directory

  virtual result<void> add_symlink(const file_entry& entry, diagnostics& diag) = 0;
  virtual result<void> begin_file(const file_entry& entry, diagnostics& diag) = 0;
  // The next piece of the file begun last; the pieces add up to entry.key.size.
  virtual result<void> write(std::string_view content, diagnostics& diag) = 0;
  virtual result<void> end_file(diagnostics& diag) = 0;
  virtual result<void> finish(diagnostics& diag) = 0;
  // Bytes the sink has received.
  virtual std::uint64_t bytes_out() const = 0;
};

}  // namespace ferry::packaging
