#pragma once
// The TLS client context: peers verified against the system's trust store, plus an optional CA bundle
// (storage.ca_bundle) for private endpoints.
#include "tracing/diagnostics.hpp"

#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <string>

namespace ferry::net {

result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const std::string& ca_bundle, diagnostics& diag);

}  // namespace ferry::net
