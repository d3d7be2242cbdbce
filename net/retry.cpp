#include "net/retry.hpp"

#include "net/error.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

#include <random>

namespace ferry::net {

bool is_retryable(const error_code& ec) {
  if (ec == make_error_code(errc::connection_failed) || ec == make_error_code(errc::timeout) ||
      ec == make_error_code(errc::server_error) || ec == make_error_code(errc::throttled))
    return true;
  // Not tls_failed: a certificate that cannot be verified, or a protocol the peer does not speak, fails
  // the same way every time.
  // Raw transport errors, for callers that pass them through unclassified.
  return ec == boost::asio::error::connection_reset || ec == boost::asio::error::connection_refused ||
         ec == boost::asio::error::broken_pipe || ec == boost::asio::error::eof ||
         ec == boost::asio::error::timed_out || ec == boost::beast::error::timeout;
}

std::chrono::milliseconds backoff_delay(const config::retry_settings& policy, int next) {
  const int doublings = std::clamp(next - 2, 0, 30);
  const auto ceiling = std::min<std::int64_t>(policy.max_delay.count(), policy.base_delay.count() << doublings);
  // Full jitter spreads clients that failed together so they do not retry together.
  std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<std::int64_t> pick(0, std::max<std::int64_t>(0, ceiling));
  return std::chrono::milliseconds(pick(rng));
}

}  // namespace ferry::net
