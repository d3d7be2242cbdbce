#include "net/tls_context.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

namespace ferry::net {

namespace ssl = boost::asio::ssl;

result<std::shared_ptr<ssl::context>> make_tls_context(const std::string& ca_bundle, diagnostics& diag) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  ctx->set_verify_mode(ssl::verify_peer);
  error_code ec;
  ctx->set_default_verify_paths(ec);
  if (ec) {
    diag.set(fmt::format("cannot load the system's trusted certificates: {}", ec.message()));
    return make_error_code(errc::tls_failed);
  }
  if (!ca_bundle.empty()) {
    ctx->load_verify_file(ca_bundle, ec);
    if (ec) {
      diag.set(fmt::format("cannot load CA bundle {} (storage.ca_bundle): {}", ca_bundle, ec.message()));
      return make_error_code(errc::tls_failed);
    }
  }
  return ctx;
}

}  // namespace ferry::net
