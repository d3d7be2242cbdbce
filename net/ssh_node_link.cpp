#include "net/ssh_node_link.hpp"

#include "net/ssh_exec.hpp"
#include "net/ssh_forward.hpp"
#include "net/ssh_transfer.hpp"

namespace ferry::net {

ssh_node_link::ssh_node_link(std::shared_ptr<ssh_session> session) : session_(std::move(session)) {}

const std::string& ssh_node_link::node() const { return session_->peer().node; }

void ssh_node_link::close() { session_->close(); }

boost::asio::awaitable<result<exit_info>> ssh_node_link::exec(tracing::action& parent, const exec_request& request,
                                                              diagnostics& diag) {
  return net::exec(parent, *session_, request, diag);
}

boost::asio::awaitable<void> ssh_node_link::serve_forwarding(tracing::action& parent,
                                                             boost::asio::ip::tcp::acceptor& listener,
                                                             forward_target target) {
  return net::serve_forwarding(parent, session_, listener, std::move(target));
}

boost::asio::awaitable<result<transfer_result>> ssh_node_link::upload(tracing::action& parent,
                                                                      std::span<const char> bytes,
                                                                      const std::string& remote_path, unsigned mode,
                                                                      diagnostics& diag) {
  return net::upload(parent, *session_, bytes, remote_path, diag, mode);
}

boost::asio::awaitable<result<transfer_result>> ssh_node_link::upload_file(tracing::action& parent,
                                                                           const std::filesystem::path& local,
                                                                           const std::string& remote_path,
                                                                           unsigned mode, diagnostics& diag) {
  return net::upload_file(parent, *session_, local, remote_path, diag, mode);
}

std::shared_ptr<node_link> link_over(std::shared_ptr<ssh_session> session) {
  return std::make_shared<ssh_node_link>(std::move(session));
}

}  // namespace ferry::net
