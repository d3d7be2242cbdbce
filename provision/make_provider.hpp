#pragma once
// The provider nodes.provider names, configured from the settings.
#include "config/settings.hpp"
#include "provision/provider.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace ferry::provision {

// `public_key_line` is ferry's own public key ("ssh-ed25519 AAAA... comment"): the local provider
// authorizes it on every node it makes. Fails with errc::unknown_provider naming the value, or
// errc::bad_node_config naming the key that is missing or wrong. The ec2 provider makes its HTTPS
// requests on `io` and finds its endpoint and credentials the AWS way in the process environment.
result<std::unique_ptr<provider>> make_provider(boost::asio::any_io_executor io, const config::settings& s,
                                                const std::string& public_key_line, diagnostics& diag);

}  // namespace ferry::provision
