#pragma once
// The EC2 client: Query API calls as form-encoded POSTs signed with SigV4 (service "ec2", the body's
// SHA-256 signed), retried through net/retry when EC2 throttles or fails, and traced: every attempt is
// an action "ec2:<Action>" (field "attempt") under the caller's action, with an "ec2:call" message
// naming what it is about. Paged calls follow nextToken to the end.
#include "config/settings.hpp"
#include "net/http_client.hpp"
#include "net/retry.hpp"
#include "net/sigv4.hpp"
#include "provision/ec2/query.hpp"
#include "provision/ec2/response.hpp"
#include "provision/ec2/target.hpp"
#include "tracing/action.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace ferry::provision::ec2 {

namespace asio = boost::asio;

class client {
 public:
  // `instances_per_page`: DescribeInstances page size when listing by filter (5 to 1000; tests use 5).
  client(net::http_client& http, target where, const config::retry_settings& retry, int instances_per_page = 1000);

  // One call with retries: the body of EC2's 2xx answer. `subject` names what the call is about in
  // traces and messages ("i-0abc", "key pair ferry-1a2b"), or is empty.
  asio::awaitable<result<std::string>> call(tracing::action& parent, const query& q, std::string_view subject,
                                            diagnostics& diag);

  asio::awaitable<result<key_pair_info>> import_key_pair(tracing::action& parent, const std::string& name,
                                                         const std::string& public_key, diagnostics& diag);
  asio::awaitable<result<instance>> run_instance(tracing::action& parent, const launch_request& launch,
                                                 diagnostics& diag);
  // Every page. With ids, an id EC2 does not know fails the call (provision::errc::node_not_found).
  asio::awaitable<result<std::vector<instance>>> describe_instances(tracing::action& parent,
                                                                    const std::vector<std::string>& ids,
                                                                    const std::vector<filter>& filters,
                                                                    diagnostics& diag);
  asio::awaitable<result<std::vector<state_change>>> terminate_instances(tracing::action& parent,
                                                                         const std::vector<std::string>& ids,
                                                                         diagnostics& diag);
  asio::awaitable<result<std::vector<instance_type_info>>> describe_instance_types(tracing::action& parent,
                                                                                   diagnostics& diag);
  asio::awaitable<result<std::vector<spot_price>>> describe_spot_price_history(
      tracing::action& parent, std::chrono::system_clock::time_point start, diagnostics& diag);

  const target& where() const { return target_; }

 private:
  net::http_request sign(const std::string& body) const;
  asio::awaitable<result<std::string>> call_once(const query& q, std::string_view subject, net::attempt_info& info);

  net::http_client& http_;
  target target_;
  net::origin origin_;
  std::string endpoint_text_;  // for messages
  net::sigv4::signer signer_;
  config::retry_settings retry_;
  int instances_per_page_;
};

}  // namespace ferry::provision::ec2
