#include "provision/ec2/api_error.hpp"

#include "net/error.hpp"
#include "provision/error.hpp"

#include <fmt/format.h>
#include <pugixml.hpp>

#include <algorithm>
#include <array>

namespace ferry::provision::ec2 {
namespace {

bool name_is(pugi::xml_node n, std::string_view name) { return n && name == n.name(); }

// <Error> directly under the root, or under <Errors>.
pugi::xml_node error_element(pugi::xml_node root) {
  if (const auto errors = root.child("Errors")) return errors.child("Error");
  return root.child("Error");
}

template <std::size_t N>
bool one_of(std::string_view code, const std::array<std::string_view, N>& codes) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

constexpr std::array<std::string_view, 7> throttling_codes = {
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
    "RequestThrottledException", "TooManyRequestsException", "SlowDown"};
constexpr std::array<std::string_view, 5> server_codes = {"InternalError", "InternalFailure", "ServiceUnavailable",
                                                          "Unavailable", "ServerInternal"};
constexpr std::array<std::string_view, 5> unknown_key_codes = {"AuthFailure", "InvalidClientTokenId",
                                                               "UnrecognizedClientException", "InvalidAccessKeyId",
                                                               "MissingAuthenticationToken"};
constexpr std::array<std::string_view, 3> clock_codes = {"RequestExpired", "RequestTimeTooSkewed",
                                                         "SignatureExpired"};
constexpr std::array<std::string_view, 4> token_codes = {"ExpiredToken", "ExpiredTokenException", "InvalidToken",
                                                         "TokenRefreshRequired"};
constexpr std::array<std::string_view, 5> denied_codes = {"UnauthorizedOperation", "AccessDenied",
                                                          "AccessDeniedException", "OptInRequired", "Blocked"};

std::string on(const call_info& call) {
  return call.subject.empty() ? std::string(call.action) : fmt::format("{} of {}", call.action, call.subject);
}

std::string suffix(const api_error& e, const call_info& call) {
  const auto id = e.request_id.empty() ? std::string() : fmt::format("request id {}, ", e.request_id);
  return fmt::format("({}endpoint {})", id, call.endpoint);
}

error_code status_only(int status, const call_info& call, diagnostics& diag) {
  diag.set(fmt::format("{} failed with HTTP {} and no EC2 error document (endpoint {})", on(call), status,
                       call.endpoint));
  if (status == 429 || status == 503) return make_error_code(net::errc::throttled);
  if (status >= 500) return make_error_code(net::errc::server_error);
  if (status == 401 || status == 403) return make_error_code(net::errc::access_denied);
  return make_error_code(errc::provider_failed);
}

error_code denied(const api_error& e, const call_info& call, diagnostics& diag) {
  std::string advice;
  if (e.code == "SignatureDoesNotMatch") {
    advice = "the request signature does not match: check the secret access key (AWS_SECRET_ACCESS_KEY or the "
             "profile's aws_secret_access_key) and that this machine's clock is right";
  } else if (e.code == "AuthFailure") {
    // EC2 says AuthFailure both for an unknown key id and for a signature made with the wrong secret.
    advice = "the credentials could not be validated: check the access key id and the secret access key "
             "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile's), ec2.region, and that this "
             "machine's clock is right";
  } else if (one_of(e.code, unknown_key_codes)) {
    advice = "the credentials are not valid for EC2: check AWS_ACCESS_KEY_ID or the profile's aws_access_key_id, "
             "and ec2.region";
  } else if (one_of(e.code, clock_codes)) {
    advice = "this machine's clock differs too much from EC2's: set the clock right";
  } else if (one_of(e.code, token_codes)) {
    advice = "the session token is expired or invalid: refresh the credentials (AWS_SESSION_TOKEN or the profile)";
  } else {
    advice = "the credentials are not allowed to do this: check their IAM policy";
  }
  diag.set(fmt::format("{} was refused ({}): {}; EC2 said: {} {}", on(call), e.code, advice, e.message,
                       suffix(e, call)));
  return make_error_code(net::errc::access_denied);
}

bool is_denial(int status, std::string_view code) {
  return code == "SignatureDoesNotMatch" || one_of(code, unknown_key_codes) || one_of(code, clock_codes) ||
         one_of(code, token_codes) || one_of(code, denied_codes) || status == 401 || status == 403;
}

}  // namespace

std::optional<api_error> find_api_error(std::string_view body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size(), pugi::parse_default, pugi::encoding_utf8)) return std::nullopt;
  const auto root = doc.document_element();
  if (!name_is(root, "Response") && !name_is(root, "ErrorResponse")) return std::nullopt;
  const auto error = error_element(root);
  if (!error) return std::nullopt;
  api_error out{error.child("Code").child_value(), error.child("Message").child_value(),
                root.child("RequestID").child_value()};
  if (out.request_id.empty()) out.request_id = root.child("RequestId").child_value();
  if (out.code.empty()) return std::nullopt;
  return out;
}

error_code api_failure(int http_status, const std::optional<api_error>& error, const call_info& call,
                       diagnostics& diag) {
  if (!error) return status_only(http_status, call, diag);
  const auto& e = *error;
  if (one_of(e.code, throttling_codes) || http_status == 429) {
    diag.set(fmt::format("{}: EC2 is throttling requests ({}) {}", on(call), e.code, suffix(e, call)));
    return make_error_code(net::errc::throttled);
  }
  if (one_of(e.code, server_codes) || http_status >= 500) {
    diag.set(fmt::format("{}: EC2 failed ({}: {}, HTTP {}) {}", on(call), e.code, e.message, http_status,
                         suffix(e, call)));
    return make_error_code(net::errc::server_error);
  }
  if (is_denial(http_status, e.code)) return denied(e, call, diag);
  if (e.code.starts_with("InvalidInstanceID.")) {
    diag.set(fmt::format("{}: no such instance ({}: {}) {}", on(call), e.code, e.message, suffix(e, call)));
    return make_error_code(errc::node_not_found);
  }
  diag.set(fmt::format("{} failed: {}: {} {}", on(call), e.code, e.message, suffix(e, call)));
  if (e.code.ends_with(".Duplicate") || e.code.ends_with("AlreadyExists")) return make_error_code(errc::already_exists);
  return make_error_code(errc::provider_failed);
}

}  // namespace ferry::provision::ec2
