#include "tracing/task_id.hpp"

#include "tracing/error.hpp"

#include <fmt/format.h>
#include <sys/random.h>

#include <charconv>
#include <stdexcept>

namespace ferry::tracing {

task_uuid new_task_uuid() {
  std::array<unsigned char, 16> bytes{};
  if (getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
    throw std::runtime_error("getrandom failed");
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  task_uuid id;
  std::size_t out = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) id.text[out++] = '-';
    id.text[out++] = hex[bytes[i] >> 4];
    id.text[out++] = hex[bytes[i] & 0x0f];
  }
  return id;
}

std::string serialize_task_id(const task_uuid& uuid, const task_level& level) {
  std::string text(uuid.view());
  text += '@';
  for (auto part : level) fmt::format_to(std::back_inserter(text), "/{}", part);
  return text;
}

namespace {

bool is_uuid_text(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = s[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
      return false;
  }
  return true;
}

}  // namespace

result<task_id> parse_task_id(std::string_view text, diagnostics& diag) {
  auto fail = [&](std::string_view why) -> result<task_id> {
    diag.set(fmt::format("task id '{}' {}; expected <uuid>@/<n>/<n>... as eliot's serialize_task_id writes it",
                         text, why));
    return make_error_code(errc::bad_task_id);
  };
  const auto at = text.find('@');
  if (at == std::string_view::npos) return fail("has no '@'");
  const auto uuid_text = text.substr(0, at);
  if (!is_uuid_text(uuid_text)) return fail("does not start with a UUID");
  task_id id;
  for (std::size_t i = 0; i < uuid_text.size(); ++i)
    id.uuid.text[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(uuid_text[i])));

  auto rest = text.substr(at + 1);
  if (rest.empty() || rest.front() != '/') return fail("has no level after '@'");
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the '/'
    const auto end = rest.find('/');
    const auto part = rest.substr(0, end);
    std::uint32_t value = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc{} || ptr != part.data() + part.size() || value == 0)
      return fail("has a level that is not a positive integer");
    id.level.push_back(value);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  }
  return id;
}

}  // namespace ferry::tracing
