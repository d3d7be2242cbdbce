#include "net/uri_encode.hpp"

#include <array>

namespace ferry::net {
namespace {

constexpr std::array<bool, 256> unreserved_table() {
  std::array<bool, 256> table{};
  for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  table['-'] = table['_'] = table['.'] = table['~'] = true;
  return table;
}

constexpr auto unreserved = unreserved_table();

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

void uri_encode_append(std::string& out, std::string_view text, slash mode) {
  static constexpr char digits[] = "0123456789ABCDEF";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (unreserved[byte] || (c == '/' && mode == slash::keep)) {
      out.push_back(c);
    } else {
      const char escaped[3] = {'%', digits[byte >> 4], digits[byte & 0x0f]};
      out.append(escaped, 3);
    }
  }
}

std::string uri_encode(std::string_view text, slash mode) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  uri_encode_append(out, text, mode);
  return out;
}

std::string uri_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace ferry::net
