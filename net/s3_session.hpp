#pragma once
// Everything needed to talk to the configured S3, built once per command: the TLS context (for https
// endpoints), the watch on storage that stops answering, the HTTP connection pool, and the client with its
// resolved endpoint and credentials.
#include "net/http_client.hpp"
#include "net/s3_client.hpp"

#include <memory>

namespace ferry::net {

struct s3_session {
  std::shared_ptr<asio::ssl::context> tls;
  std::unique_ptr<stall_watch> watch;  // before the pool and the client, which report to it
  std::unique_ptr<http_client> http;
  std::unique_ptr<s3_client> s3;
};

http_client_settings http_settings(const config::net_settings& net);

stall_settings stall_settings_of(const config::net_settings& net);

// `on_stall` shows the stall warning to the person running the command (none: the trace only).
result<s3_session> open_s3_session(asio::any_io_executor io, cpu_pool& cpu, const config::settings& settings,
                                   const environment& env, diagnostics& diag, stall_watch::notice on_stall = {});

}  // namespace ferry::net
