#pragma once
// EC2's error documents and what a failed call means, without any I/O. EC2 answers a failed Query call
// with <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>; the IAM-style
// <ErrorResponse><Error> (and moto's <ErrorResponse><Errors><Error> for signature failures) are read too.
//
// api_failure() turns a failure into a code and a message a person can act on:
// - net::errc::throttled and net::errc::server_error for what net/retry retries;
// - net::errc::access_denied for refused credentials or permissions, naming what to check;
// - provision::errc::node_not_found for an instance id EC2 does not know;
// - provision::errc::already_exists for a *.Duplicate (a key pair imported before);
// - provision::errc::provider_failed for any other refusal, with EC2's code and words.
// Messages name the Action, what it was about (an instance id, a key pair) and the endpoint; they never
// carry a secret.
#include "tracing/diagnostics.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace ferry::provision::ec2 {

struct api_error {
  std::string code;  // "InvalidInstanceID.NotFound", "RequestLimitExceeded", ...
  std::string message;
  std::string request_id;
};

// The first error of an error document, or nullopt when `body` is empty, not XML or another document.
std::optional<api_error> find_api_error(std::string_view body);

struct call_info {
  std::string_view action;    // "RunInstances"
  std::string_view subject;   // "i-0abc...", "key pair ferry-...", or empty
  std::string_view endpoint;  // "https://ec2.eu-west-1.amazonaws.com"
};

error_code api_failure(int http_status, const std::optional<api_error>& error, const call_info& call,
                       diagnostics& diag);

}  // namespace ferry::provision::ec2
