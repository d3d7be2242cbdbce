// net/ssh_forward.hpp against a real sshd: workstation connections forwarded through direct-tcpip channels
// to a server the node reaches (here on the same loopback, as a node reaches its own private address).
// Bytes arrive whole both ways and in order, with several connections at once and half-closes passed on; a
// target nobody listens on fails that connection alone, naming it; cancelling ends every connection.
#include "ssh_harness.hpp"

#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/run_all.hpp"
#include "net/ssh_forward.hpp"
#include "tracing/action_types.hpp"

#include "support/quoted.hpp"
#include "support/random_bytes.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

namespace ferry::net {
namespace {

using ssh_forward = ssh_server_test;
using tcp = asio::ip::tcp;

tcp::acceptor listen_on_loopback(asio::io_context& io) {
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a;
}

// The target: reads a connection to its end, then answers with the SHA-256 of what came and closes.
asio::awaitable<void> digest_server_connection(tcp::socket s) {
  co_await accept_cancellation();
  sha256_stream h;
  std::vector<char> buf(64 << 10);
  for (;;) {
    error_code ec;
    const auto n = co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    h.update(std::string_view(buf.data(), n));
    if (ec) break;
  }
  const auto answer = to_hex(h.finish()) + "\n";
  error_code ec;
  co_await asio::async_write(s, asio::buffer(answer), asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> digest_server(tcp::acceptor& a, int connections) {
  co_await accept_cancellation();
  std::vector<asio::awaitable<void>> each;
  for (int i = 0; i < connections; ++i) {
    error_code ec;
    auto s = co_await a.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    each.push_back(digest_server_connection(std::move(s)));
  }
  co_await run_all(std::move(each));
}

// A client: sends `body`, half-closes, reads the answer to the end.
asio::awaitable<void> client(std::uint16_t port, std::string body, std::string& answer) {
  co_await accept_cancellation();
  tcp::socket s(co_await asio::this_coro::executor);
  error_code ec;
  co_await s.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                           asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return;
  co_await asio::async_write(s, asio::buffer(body), asio::redirect_error(asio::use_awaitable, ec));
  s.shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> buf(4096);
  for (;;) {
    const auto n = co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    answer.append(buf.data(), n);
    if (ec) break;
  }
}

// Forwards until the clients are done, then cancels the forwarding.
asio::awaitable<void> clients_then_stop(std::vector<asio::awaitable<void>> clients, asio::cancellation_signal& stop) {
  co_await accept_cancellation();
  co_await run_all(std::move(clients));
  stop.emit(asio::cancellation_type::total);
}

// A spawned coroutine hears total cancellation only once it accepts it.
asio::awaitable<void> serving(tracing::action& act, std::shared_ptr<ssh_session> session, tcp::acceptor& listener,
                              forward_target target) {
  co_await accept_cancellation();
  co_await serve_forwarding(act, std::move(session), listener, std::move(target));
}

asio::awaitable<void> serve_until(tracing::action& act, std::shared_ptr<ssh_session> session, tcp::acceptor& listener,
                                  forward_target target, asio::cancellation_signal& stop) {
  auto ex = co_await asio::this_coro::executor;
  co_await asio::co_spawn(ex, serving(act, std::move(session), listener, std::move(target)),
                          asio::bind_cancellation_slot(stop.slot(), asio::use_awaitable));
}

asio::awaitable<result<void>> forward_several(ssh_forward& t, const std::vector<std::string>& bodies,
                                              std::vector<std::string>& answers, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  auto target = listen_on_loopback(t.io);
  auto listener = listen_on_loopback(t.io);
  const auto target_port = target.local_endpoint().port();
  const auto port = listener.local_endpoint().port();
  asio::cancellation_signal stop;
  std::vector<asio::awaitable<void>> clients;
  for (std::size_t i = 0; i < bodies.size(); ++i) clients.push_back(client(port, bodies[i], answers[i]));
  std::vector<asio::awaitable<void>> all;
  all.push_back(digest_server(target, static_cast<int>(bodies.size())));
  all.push_back(serve_until(t.trace.root(), *session, listener, {"127.0.0.1", target_port}, stop));
  all.push_back(clients_then_stop(std::move(clients), stop));
  co_await run_all(std::move(all));
  co_return result<void>{};
}

TEST_F(ssh_forward, several_connections_move_their_bytes_whole_both_ways) {
  std::vector<std::string> bodies{test::random_bytes(8 << 20, 1), test::random_bytes(1 << 20, 2), "",
                                  test::random_bytes(100, 3), test::random_bytes(3 << 20, 4)};
  std::vector<std::string> answers(bodies.size());
  diagnostics diag;
  ASSERT_TRUE(run(forward_several(*this, bodies, answers, diag))) << diag.message;
  for (std::size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(answers[i], hex_sha256(bodies[i]) + "\n") << i;
  const auto text = trace_text();
  EXPECT_NE(text.find(test::quoted(action_types::ssh::forward)), std::string::npos);
  EXPECT_NE(text.find(fmt::format(R"("to_node":{})", 8 << 20)), std::string::npos) << text;
  EXPECT_NE(text.find(R"("from_node":65)"), std::string::npos) << text;  // 64 hex digits and a newline
}

asio::awaitable<result<void>> forward_to_nowhere(ssh_forward& t, std::string& answer, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  std::uint16_t closed_port = 0;
  {
    auto probe = listen_on_loopback(t.io);  // a port that was free, and is closed again
    closed_port = probe.local_endpoint().port();
  }
  auto listener = listen_on_loopback(t.io);
  const auto port = listener.local_endpoint().port();
  asio::cancellation_signal stop;
  std::vector<asio::awaitable<void>> clients;
  clients.push_back(client(port, "hello", answer));
  std::vector<asio::awaitable<void>> all;
  all.push_back(serve_until(t.trace.root(), *session, listener, {"127.0.0.1", closed_port}, stop));
  all.push_back(clients_then_stop(std::move(clients), stop));
  co_await run_all(std::move(all));
  // The session is still good for commands.
  auto after = co_await run_command(t.trace.root(), **session, "echo still", diag);
  if (!after) co_return after.error();
  if (after->out != "still\n") co_return make_error_code(errc::ssh_channel_failed);
  co_return result<void>{};
}

TEST_F(ssh_forward, a_target_nobody_listens_on_fails_that_connection_naming_it) {
  std::string answer;
  diagnostics diag;
  ASSERT_TRUE(run(forward_to_nowhere(*this, answer, diag))) << diag.message;
  EXPECT_EQ(answer, "");  // the connection was closed, nothing came
  const auto text = trace_text();
  EXPECT_NE(text.find(test::quoted(action_types::ssh::forward)), std::string::npos);
  EXPECT_NE(text.find(R"("action_status":"failed")"), std::string::npos) << text;
  EXPECT_NE(text.find("a forward to 127.0.0.1:"), std::string::npos) << text;
}

// A client that sends a little and then waits for an answer that never comes: only a cancellation ends it.
asio::awaitable<void> stuck_client(std::uint16_t port, bool& ended) {
  co_await accept_cancellation();
  tcp::socket s(co_await asio::this_coro::executor);
  error_code ec;
  co_await s.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                           asio::redirect_error(asio::use_awaitable, ec));
  co_await asio::async_write(s, asio::buffer(std::string("x")), asio::redirect_error(asio::use_awaitable, ec));
  std::vector<char> buf(16);
  co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
  ended = true;  // the forward closed the connection
}

// The target accepts, reads the client's first byte and then says nothing; the forwarding is stopped once
// that byte has come through it.
asio::awaitable<void> silent_server(tcp::acceptor& a, tcp::socket& kept, asio::cancellation_signal& stop) {
  co_await accept_cancellation();
  error_code ec;
  kept = co_await a.async_accept(asio::redirect_error(asio::use_awaitable, ec));
  char byte = 0;
  if (!ec) co_await asio::async_read(kept, asio::buffer(&byte, 1), asio::redirect_error(asio::use_awaitable, ec));
  stop.emit(asio::cancellation_type::total);
}

asio::awaitable<result<void>> cancel_mid_connection(ssh_forward& t, bool& client_ended, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  auto target = listen_on_loopback(t.io);
  auto listener = listen_on_loopback(t.io);
  tcp::socket kept(t.io);
  asio::cancellation_signal stop;
  std::vector<asio::awaitable<void>> all;
  all.push_back(silent_server(target, kept, stop));
  all.push_back(serve_until(t.trace.root(), *session, listener, {"127.0.0.1", target.local_endpoint().port()}, stop));
  all.push_back(stuck_client(listener.local_endpoint().port(), client_ended));
  co_await run_all(std::move(all));
  co_return result<void>{};
}

TEST_F(ssh_forward, cancelling_ends_every_connection) {
  bool client_ended = false;
  diagnostics diag;
  ASSERT_TRUE(run(cancel_mid_connection(*this, client_ended, diag))) << diag.message;
  EXPECT_TRUE(client_ended);
  const auto text = trace_text();
  EXPECT_NE(text.find(R"("reason":"cancelled")"), std::string::npos) << text;
}

}  // namespace
}  // namespace ferry::net
