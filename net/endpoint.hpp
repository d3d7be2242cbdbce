#pragma once
// Where requests for an AWS service go: a configured endpoint (MinIO, moto, LocalStack, a VPC
// endpoint) or AWS's own, and for S3 whether the bucket goes in the host name or the path.
#include "net/aws_profile.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::net {

struct endpoint {
  std::string scheme;      // "http" or "https"
  std::string host;        // lowercase; an IPv6 address keeps its brackets
  std::uint16_t port = 0;  // always set: 80 or 443 when the URL gives none
  std::string base_path;   // "" or "/prefix" (as encoded in the URL), never ending in '/'
  bool aws_owned = false;  // AWS's own endpoint rather than a configured one

  bool default_port() const;
  bool ip_host() const;
  std::string authority() const;  // host, plus ":port" unless it is the scheme's default: the Host header
  std::string origin() const;     // scheme://authority
};

// http(s)://host[:port][/base/path]; no user info, query or fragment (errc::bad_endpoint). Errors show the
// URL only as tracing::shown_url() does.
result<endpoint> parse_endpoint(std::string_view url, diagnostics& diag);

// AWS's own endpoint for a service id ("s3", "ec2") in a region.
endpoint aws_endpoint(std::string_view service, std::string_view region);

// The configured endpoint for a service id, strongest first: `override_url` (ferry's own config),
// AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, the service's entry in the profile's [services]
// section, the profile's endpoint_url. nullopt means AWS's own endpoint; so does
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true, which only the override survives.
result<std::optional<endpoint>> resolve_endpoint(std::string_view service, std::string_view override_url,
                                                 const environment& env, const aws_profile& profile, diagnostics& diag);

enum class addressing_style {
  automatic,       // virtual-hosted on AWS's own endpoints when the bucket allows it; path otherwise
  path,            // https://host/bucket/key
  virtual_hosted,  // https://bucket.host/key, falling back to path when the bucket cannot be a host name
                   // (and, over https, when it has dots: TLS wildcard certificates cover one label)
};

// "auto", "path" or "virtual", as in the AWS config's s3.addressing_style.
result<addressing_style> parse_addressing_style(std::string_view text, diagnostics& diag);

// `override_text` (ferry's own config) when not empty, else the profile's s3.addressing_style,
// else automatic.
result<addressing_style> resolve_addressing_style(std::string_view override_text, const aws_profile& profile,
                                                  diagnostics& diag);

// A bucket name that works as DNS labels: 3 to 63 of a-z 0-9 '-' in labels that start and end with
// a letter or digit. Dots split labels, but break TLS wildcard certificates, hence the switch.
bool is_dns_compatible_bucket(std::string_view bucket, bool allow_dots);

bool uses_virtual_host(const endpoint& at, std::string_view bucket, addressing_style style);

struct object_location {
  std::string origin;  // scheme://host[:port]
  std::string host;    // the Host header
  std::string path;    // URI-encoded once: the request target and, with S3's rules, the signed path
};

// Where (bucket, key) lives. An empty key addresses the bucket itself ("/bucket" or "/").
object_location locate_object(const endpoint& at, std::string_view bucket, std::string_view key,
                              addressing_style style);

}  // namespace ferry::net
