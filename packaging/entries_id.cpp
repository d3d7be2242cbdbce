#include "packaging/entries_id.hpp"

#include <fmt/format.h>

#include <iterator>

namespace ferry::packaging {

entries_id_stream::entries_id_stream() {
  // A version line first: a change to this format must never reuse an old id for different bytes.
  hash_.update(std::string_view("ferry-layer-v1\n"));
}

void entries_id_stream::add(std::string_view path, std::uint32_t mode, const net::sha256_digest& content) {
  line_.clear();
  line_.append(path);
  line_.push_back('\0');  // paths may hold any byte but NUL
  fmt::format_to(std::back_inserter(line_), "{:o}", mode);
  line_.push_back('\0');
  net::append_hex(line_, content);
  line_.push_back('\n');
  hash_.update(line_);
}

void entries_id_stream::add_piece(std::string_view path, std::uint32_t mode, std::uint64_t offset,
                                  std::uint64_t length, const net::sha256_digest& content) {
  line_.clear();
  line_.append(path);
  line_.push_back('\0');
  fmt::format_to(std::back_inserter(line_), "{:o}", mode);
  line_.push_back('\0');
  fmt::format_to(std::back_inserter(line_), "{}+{}", offset, length);
  line_.push_back('\0');
  net::append_hex(line_, content);
  line_.push_back('\n');
  hash_.update(line_);
}

net::sha256_digest entries_id_stream::finish() { return hash_.finish(); }

}  // namespace ferry::packaging
