#pragma once
// Failures of the net module: finding AWS credentials and endpoints, talking to S3 and EC2, and SSH.
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::net {

enum class errc {
  // Settings: credentials, profiles, endpoints.
  no_credentials = 1,      // neither the environment nor the profile files hold an access key
  incomplete_credentials,  // an access key id without its secret key, or the reverse
  bad_credentials_file,    // an AWS credentials or config file has a malformed line
  unreadable_file,         // an AWS credentials or config file exists but cannot be read
  profile_not_found,       // AWS_PROFILE names a profile that no file defines
  bad_endpoint,            // an endpoint URL is not http(s)://host[:port][/path]
  bad_addressing_style,    // an S3 addressing style is not auto, path or virtual

  // Transport and services.
  name_resolution_failed,  // the endpoint's host name does not resolve
  connection_failed,       // TCP connect failed or the connection dropped
  tls_failed,              // the TLS handshake or certificate check failed
  timeout,                 // no answer within the deadline
  http_status,             // the server answered with an unexpected HTTP status
  bad_response,            // the response could not be parsed
  s3_error,                // S3 answered with an <Error> document
  access_denied,           // the service refused the credentials or the operation
  no_such_bucket,
  no_such_key,
  server_error,  // 500, 502, 503 or 504: the service failed; worth another attempt
  throttled,     // 429, 503 SlowDown: the service asks us to slow down
  body_too_large,  // a response body ferry reads whole (XML) is larger than it should ever be
  no_such_upload,  // a multipart upload id that was aborted, completed or never existed
  stalled,         // storage made no progress for net.stall_limit (net/stall_watch.hpp)
  // A conditional write's condition did not hold (HTTP 412 PreconditionFailed, or 409
  // ConditionalRequestConflict when another conditional write to the key was under way): never retried,
  // the caller reads the object again and decides.
  precondition_failed,

  // SSH.
  ssh_handshake_failed,  // the SSH protocol handshake (banner, key exchange) failed
  host_key_changed,      // the node presented another host key than the one ferry's known_hosts holds for it
  known_hosts_error,     // ferry's known_hosts file cannot be read, parsed or written
  ssh_key_error,         // ferry's own key (or the identity file) cannot be created or loaded
  ssh_auth_failed,       // the node refused every key ferry offered
  ssh_channel_failed,    // the node refused to open a channel or to run a command on it
  connection_lost,       // the SSH connection dropped (the peer closed it or died)
  peer_unresponsive,     // the peer stopped answering keepalives: it vanished without closing
  session_closed,        // the SSH session was closed (by its owner or for being idle)
  transfer_failed,       // an upload or download through SSH failed or its checksum did not match
  output_too_large,      // a command's output collected in memory went over its cap
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::net

template <>
struct boost::system::is_error_code_enum<ferry::net::errc> : std::true_type {};
