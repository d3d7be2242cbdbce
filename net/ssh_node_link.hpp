#pragma once
// The node link (net/node_link.hpp) over a logged-in SSH session (net/ssh_connect.hpp opens one): exec
// runs on an exec channel under ferry's process-group wrapper (net/ssh_exec.hpp), forwarding uses
// direct-tcpip channels (net/ssh_forward.hpp), and uploads go through exec channels too
// (net/ssh_transfer.hpp). Their traces are the ssh:* actions those name.
//
// The link holds the session: the session disconnects when the last link (and the last command running
// on it) lets go.
#include "net/node_link.hpp"
#include "net/ssh_session.hpp"

#include <memory>

namespace ferry::net {

class ssh_node_link final : public node_link {
 public:
  explicit ssh_node_link(std::shared_ptr<ssh_session> session);

  ssh_session& session() const { return *session_; }

  const std::string& node() const override;
  void close() override;
  boost::asio::awaitable<result<exit_info>> exec(tracing::action& parent, const exec_request& request,
                                                 diagnostics& diag) override;
  boost::asio::awaitable<void> serve_forwarding(tracing::action& parent, boost::asio::ip::tcp::acceptor& listener,
                                                forward_target target) override;
  boost::asio::awaitable<result<transfer_result>> upload(tracing::action& parent, std::span<const char> bytes,
                                                         const std::string& remote_path, unsigned mode,
                                                         diagnostics& diag) override;
  boost::asio::awaitable<result<transfer_result>> upload_file(tracing::action& parent,
                                                              const std::filesystem::path& local,
                                                              const std::string& remote_path, unsigned mode,
                                                              diagnostics& diag) override;

 private:
  std::shared_ptr<ssh_session> session_;
};

// A shared link over `session`.
std::shared_ptr<node_link> link_over(std::shared_ptr<ssh_session> session);

}  // namespace ferry::net
