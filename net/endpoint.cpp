#include "net/endpoint.hpp"

#include "net/error.hpp"
#include "net/uri_encode.hpp"
#include "tracing/shown_url.hpp"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <fmt/format.h>

#include <charconv>

namespace ferry::net {
namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::uint16_t scheme_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

error_code bad_endpoint(diagnostics& diag, std::string_view url, std::string_view why) {
  diag.set(fmt::format("endpoint '{}': {}", tracing::shown_url(url), why));
  return make_error_code(errc::bad_endpoint);
}

// Config files name a service "s3" or "ec2", environment variables "S3" or "EC2"; both spell
// spaces and dashes as '_'.
std::string config_service_name(std::string_view service) {
  std::string out = lowercase(service);
  for (auto& c : out) {
    if (c == ' ' || c == '-') c = '_';
  }
  return out;
}

std::string env_service_name(std::string_view service) {
  std::string out = config_service_name(service);
  for (auto& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// The profile may point at a "[services NAME]" section holding per-service settings.
std::optional<std::string_view> services_section_endpoint(const aws_profile& profile, std::string_view service) {
  const auto section = profile.config_setting("services");
  if (!section) return std::nullopt;
  const auto url =
      profile.config_file.get(fmt::format("services {}", *section), config_service_name(service) + ".endpoint_url");
  if (!url || url->empty()) return std::nullopt;
  return url;
}

struct labelled_url {
  std::string url;
  std::string origin;  // where it came from, for messages
};

std::optional<labelled_url> configured_url(std::string_view service, const environment& env,
                                           const aws_profile& profile) {
  const auto ignore = set_variable(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  if (ignore && lowercase(*ignore) == "true") return std::nullopt;
  const auto specific = "AWS_ENDPOINT_URL_" + env_service_name(service);
  if (auto url = set_variable(env, specific)) return labelled_url{*url, specific};
  if (auto url = set_variable(env, "AWS_ENDPOINT_URL")) return labelled_url{*url, "AWS_ENDPOINT_URL"};
  if (auto url = services_section_endpoint(profile, service)) {
    return labelled_url{std::string(*url), fmt::format("{} [services {}]", profile.config_path.string(),
                                                       *profile.config_setting("services"))};
  }
  if (auto url = profile.config_setting("endpoint_url")) {
    return labelled_url{std::string(*url), fmt::format("{} [profile {}]", profile.config_path.string(), profile.name)};
  }
  return std::nullopt;
}

bool is_label(std::string_view label) {
  if (label.empty() || label.front() == '-' || label.back() == '-') return false;
  for (const char c : label) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool looks_like_ipv4(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789.") == std::string_view::npos;
}

}  // namespace

bool endpoint::default_port() const { return port == scheme_port(scheme); }

bool endpoint::ip_host() const { return host.starts_with('[') || looks_like_ipv4(host); }

std::string endpoint::authority() const { return default_port() ? host : fmt::format("{}:{}", host, port); }

std::string endpoint::origin() const { return fmt::format("{}://{}", scheme, authority()); }

result<endpoint> parse_endpoint(std::string_view url, diagnostics& diag) {
  const auto parsed = boost::urls::parse_absolute_uri(url);
  if (!parsed) return bad_endpoint(diag, url, "not an absolute URL");
  const auto& view = *parsed;
  endpoint out;
  out.scheme = lowercase(view.scheme());
  if (out.scheme != "http" && out.scheme != "https") return bad_endpoint(diag, url, "the scheme must be http or https");
  if (view.has_userinfo()) {
    return bad_endpoint(diag, url, "user info is not allowed; credentials come from AWS settings");
  }
  if (view.has_query() || view.has_fragment()) return bad_endpoint(diag, url, "a query or fragment is not allowed");
  out.host = lowercase(view.encoded_host());
  if (out.host.empty()) return bad_endpoint(diag, url, "no host");
  if (out.host.find('%') != std::string::npos) {
    return bad_endpoint(diag, url, "percent-encoded host names are not supported");
  }
  out.port = scheme_port(out.scheme);
  if (view.has_port()) {
    const std::string_view digits = view.port();
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value == 0 || value > 65535) {
      return bad_endpoint(diag, url, "the port must be a number from 1 to 65535");
    }
    out.port = static_cast<std::uint16_t>(value);
  }
  std::string_view path = view.encoded_path();
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.base_path = std::string(path);
  return out;
}

endpoint aws_endpoint(std::string_view service, std::string_view region) {
  const std::string_view suffix = region.starts_with("cn-") ? "amazonaws.com.cn" : "amazonaws.com";
  return endpoint{"https", fmt::format("{}.{}.{}", lowercase(service), region, suffix), 443, "", true};
}

result<std::optional<endpoint>> resolve_endpoint(std::string_view service, std::string_view override_url,
                                                 const environment& env, const aws_profile& profile,
                                                 diagnostics& diag) {
  std::optional<labelled_url> chosen;
  if (!override_url.empty()) {
    chosen = labelled_url{std::string(override_url), "ferry's configuration"};
  } else {
    chosen = configured_url(service, env, profile);
  }
  if (!chosen) return std::optional<endpoint>();
  auto parsed = parse_endpoint(chosen->url, diag);
  if (!parsed) {
    diag.set(fmt::format("{} (from {})", diag.message, chosen->origin));
    return parsed.error();
  }
  return std::optional<endpoint>(std::move(*parsed));
}

result<addressing_style> parse_addressing_style(std::string_view text, diagnostics& diag) {
  if (text == "auto") return addressing_style::automatic;
  if (text == "path") return addressing_style::path;
  if (text == "virtual") return addressing_style::virtual_hosted;
  diag.set(fmt::format("addressing style '{}': expected auto, path or virtual", text));
  return make_error_code(errc::bad_addressing_style);
}

result<addressing_style> resolve_addressing_style(std::string_view override_text, const aws_profile& profile,
                                                  diagnostics& diag) {
  if (!override_text.empty()) return parse_addressing_style(override_text, diag);
  if (auto text = profile.config_setting("s3.addressing_style")) {
    auto style = parse_addressing_style(*text, diag);
    if (!style) diag.set(fmt::format("{} [profile {}]: {}", profile.config_path.string(), profile.name, diag.message));
    return style;
  }
  return addressing_style::automatic;
}

bool is_dns_compatible_bucket(std::string_view bucket, bool allow_dots) {
  if (bucket.size() < 3 || bucket.size() > 63 || looks_like_ipv4(bucket)) return false;
  if (!allow_dots && bucket.find('.') != std::string_view::npos) return false;
  while (true) {
    const auto dot = bucket.find('.');
    if (!is_label(bucket.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    bucket.remove_prefix(dot + 1);
  }
}

bool uses_virtual_host(const endpoint& at, std::string_view bucket, addressing_style style) {
  switch (style) {
    case addressing_style::path: return false;
    case addressing_style::virtual_hosted:
      return !at.ip_host() && is_dns_compatible_bucket(bucket, at.scheme != "https");
    case addressing_style::automatic: return at.aws_owned && is_dns_compatible_bucket(bucket, false);
  }
  return false;
}

object_location locate_object(const endpoint& at, std::string_view bucket, std::string_view key,
                              addressing_style style) {
  object_location out;
  std::string& path = out.path;
  path.reserve(at.base_path.size() + bucket.size() + key.size() * 3 / 2 + 2);
  path = at.base_path;
  if (uses_virtual_host(at, bucket, style)) {
    out.host = fmt::format("{}.{}", bucket, at.authority());
    if (key.empty()) path.push_back('/');
  } else {
    out.host = at.authority();
    path.push_back('/');
    uri_encode_append(path, bucket);
  }
  if (!key.empty()) {
    path.push_back('/');
    uri_encode_append(path, key, slash::keep);
  }
  out.origin = fmt::format("{}://{}", at.scheme, out.host);
  return out;
}

}  // namespace ferry::net
