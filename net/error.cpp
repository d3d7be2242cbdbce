#include "net/error.hpp"

namespace ferry::net {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.net"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::no_credentials: return "no AWS credentials found";
      case errc::incomplete_credentials: return "incomplete AWS credentials";
      case errc::bad_credentials_file: return "malformed AWS credentials or config file";
      case errc::unreadable_file: return "AWS credentials or config file cannot be read";
      case errc::profile_not_found: return "AWS profile not found";
      case errc::bad_endpoint: return "malformed endpoint URL";
      case errc::bad_addressing_style: return "unknown S3 addressing style";
      case errc::name_resolution_failed: return "host name does not resolve";
      case errc::connection_failed: return "connection failed";
      case errc::tls_failed: return "TLS handshake failed";
      case errc::timeout: return "timed out";
      case errc::http_status: return "unexpected HTTP status";
      case errc::bad_response: return "malformed response";
      case errc::s3_error: return "S3 error";
      case errc::access_denied: return "access denied";
      case errc::no_such_bucket: return "no such bucket";
      case errc::no_such_key: return "no such key";
      case errc::server_error: return "server error";
      case errc::throttled: return "throttled by the server";
      case errc::body_too_large: return "response body too large";
      case errc::no_such_upload: return "no such multipart upload";
      case errc::stalled: return "storage made no progress";
      case errc::precondition_failed: return "the write's precondition does not hold";
      case errc::ssh_handshake_failed: return "SSH handshake failed";
      case errc::host_key_changed: return "SSH host key changed";
      case errc::known_hosts_error: return "known_hosts file error";
      case errc::ssh_key_error: return "SSH key error";
      case errc::ssh_auth_failed: return "SSH authentication failed";
      case errc::ssh_channel_failed: return "SSH channel failed";
      case errc::connection_lost: return "connection lost";
      case errc::peer_unresponsive: return "peer stopped answering";
      case errc::session_closed: return "SSH session closed";
      case errc::transfer_failed: return "SSH transfer failed";
      case errc::output_too_large: return "command output too large";
    }
    return "unknown net error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::net
