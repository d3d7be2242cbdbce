#include "packaging/zip_digest.hpp"

#include "net/digest.hpp"

#include <charconv>

namespace ferry::packaging {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string sidecar_key(std::string_view zip_key) {
  std::string key(zip_key);
  key.append(".sha256");
  return key;
}

std::string sidecar_text(const zip_digest& digest) {
  std::string text = net::to_hex(digest.sha256);
  text.push_back(' ');
  text.append(std::to_string(digest.zip_bytes));
  text.push_back('\n');
  return text;
}

std::optional<zip_digest> parse_sidecar(std::string_view text) {
  constexpr std::size_t hex_size = 2 * sizeof(sha256_digest);
  if (text.size() < hex_size + 3 || text[hex_size] != ' ' || !text.ends_with('\n')) return std::nullopt;
  auto sha = parse_hex_digest(text.substr(0, hex_size));
  const auto number = text.substr(hex_size + 1, text.size() - hex_size - 2);
  zip_digest out;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), out.zip_bytes);
  // from_chars takes no sign or space, so "0012" is the only other spelling it lets through: refuse it too.
  if (!sha || ec != std::errc{} || end != number.data() + number.size() || (number.size() > 1 && number[0] == '0')) {
    return std::nullopt;
  }
  out.sha256 = *sha;
  return out;
}

std::optional<sha256_digest> parse_hex_digest(std::string_view hex) {
  sha256_digest out{};
  if (hex.size() != 2 * out.size()) return std::nullopt;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int high = hex_value(hex[2 * i]);
    const int low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out[i] = static_cast<unsigned char>(high << 4 | low);
  }
  return out;
}

}  // namespace ferry::packaging
