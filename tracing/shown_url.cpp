#include "tracing/shown_url.hpp"

#include "tracing/json_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ferry::tracing {
namespace {

// One "name=value" of a query, its value redacted when the name looks secret.
std::string shown_parameter(std::string_view parameter) {
  const auto eq = parameter.find('=');
  if (eq == std::string_view::npos) return std::string(parameter);
  const auto name = parameter.substr(0, eq);
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.starts_with("x-amz-") || is_secret_key(name) || lower == "sig" || lower.find("key") != std::string::npos)
    return fmt::format("{}=REDACTED", name);
  return std::string(parameter);
}

std::string shown_query(std::string_view query) {
  std::string out;
  while (true) {
    const auto amp = query.find('&');
    out += shown_parameter(query.substr(0, amp));
    if (amp == std::string_view::npos) return out;
    out.push_back('&');
    query.remove_prefix(amp + 1);
  }
}

}  // namespace

std::string shown_url(std::string_view url) {
  // By text, not by a URL parser: the URLs that need hiding are also the ones that fail to parse.
  std::string out;
  const auto scheme_end = url.find("://");
  const auto authority_begin = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  auto authority_end = url.find_first_of("/?#", authority_begin);
  if (authority_end == std::string_view::npos) authority_end = url.size();
  const auto at = url.substr(0, authority_end).rfind('@');
  if (at != std::string_view::npos && at >= authority_begin) {
    out = fmt::format("{}***@{}", url.substr(0, authority_begin), url.substr(at + 1, authority_end - at - 1));
  } else {
    out = std::string(url.substr(0, authority_end));
  }
  auto rest = url.substr(authority_end);
  const auto question = rest.find('?');
  if (question == std::string_view::npos) return out + std::string(rest);
  out += rest.substr(0, question + 1);
  rest.remove_prefix(question + 1);
  const auto hash = rest.find('#');
  out += shown_query(rest.substr(0, hash));
  if (hash != std::string_view::npos) out += rest.substr(hash);
  return redact_text(out);
}

}  // namespace ferry::tracing
