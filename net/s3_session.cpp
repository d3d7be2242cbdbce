#include "net/s3_session.hpp"

#include "net/tls_context.hpp"

namespace ferry::net {

http_client_settings http_settings(const config::net_settings& net) {
  http_client_settings s;
  s.timeouts = {net.connect_timeout, net.read_timeout, net.write_timeout};
  s.max_connections_per_host = net.max_connections_per_host;
  s.idle_timeout = net.pool_idle_timeout;
  return s;
}

stall_settings stall_settings_of(const config::net_settings& net) { return {net.stall_warning, net.stall_limit}; }

result<s3_session> open_s3_session(asio::any_io_executor io, cpu_pool& cpu, const config::settings& settings,
                                   const environment& env, diagnostics& diag, stall_watch::notice on_stall) {
  auto target = resolve_s3_target(settings.storage, env, diag);
  if (!target) return target.error();
  s3_session session;
  if (target->at.scheme == "https") {
    auto tls = make_tls_context(settings.storage.ca_bundle, diag);
    if (!tls) return tls.error();
    session.tls = *tls;
  }
  session.watch = std::make_unique<stall_watch>(stall_settings_of(settings.net), std::move(on_stall));
  session.http = std::make_unique<http_client>(io, http_settings(settings.net), session.tls, session.watch.get());
  session.s3 = std::make_unique<s3_client>(*session.http, cpu, std::move(*target), settings, session.watch.get());
  return session;
}

}  // namespace ferry::net
