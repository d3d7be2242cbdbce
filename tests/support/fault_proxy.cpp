#include "support/fault_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ferry::test {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

enum direction { upload = 0, download = 1 };

// A link with a rate: when each direction is free again. Shared between proxies, so locked.
struct link_state {
  std::atomic<std::uint64_t> rate{0};
  std::mutex mutex;
  std::array<std::chrono::steady_clock::time_point, 2> free_at{};

  // When a chunk of `n` bytes the link takes now has passed.
  std::chrono::steady_clock::time_point take(direction d, std::uint64_t n, std::uint64_t r) {
    const std::lock_guard lock(mutex);
    const auto now = std::chrono::steady_clock::now();
    free_at[d] = std::max(free_at[d], now) + std::chrono::nanoseconds(n * 1'000'000'000ull / r);
    return free_at[d];
  }
};

// One proxied connection: both sockets, owned by the two pumps that share it. Everything here runs on
// the proxy's single I/O thread, so it needs no locks.
struct connection {
  connection(tcp::socket accepted, bool subject_to_cuts)
      : client(std::move(accepted)), server(client.get_executor()), faulty(subject_to_cuts) {}

  tcp::socket& source(direction d) { return d == upload ? client : server; }
  tcp::socket& sink(direction d) { return d == upload ? server : client; }

  // Closes both sockets with a reset. Pending operations on them end with operation_aborted.
  void reset() {
    if (closed) return;
    closed = true;
    for (auto* socket : {&client, &server}) {
      boost::system::error_code ignored;
      socket->set_option(tcp::socket::linger(true, 0), ignored);
      socket->close(ignored);
    }
  }

  tcp::socket client;
  tcp::socket server;
  const bool faulty;
  bool closed = false;
  std::array<std::uint64_t, 2> forwarded{};
  std::string head;  // what the client sent first, up to the end of its first request's headers
  bool head_done = false;
};

}  // namespace

struct fault_proxy::impl {
  impl(const std::string& target_host, std::uint16_t target_port, const std::string& listen_host)
      : target(asio::ip::make_address(target_host), target_port), host(listen_host) {
    acceptor.open(tcp::v4());
    acceptor.bind({asio::ip::make_address_v4(listen_host), 0});
    acceptor.listen();
    port = acceptor.local_endpoint().port();
  }

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(tcp::socket accepted);
  asio::awaitable<void> pump(std::shared_ptr<connection> conn, direction d);

  // Spends one connection's worth of the faulty budget, unless it is unlimited or spent.
  bool take_faulty_slot() {
    auto budget = faulty_budget.load();
    while (budget != 0) {
      if (budget == unlimited || faulty_budget.compare_exchange_weak(budget, budget - 1)) return true;
    }
    return false;
  }

  // Declared first so that it is destroyed last: the coroutine frames it destroys refer to the rest.
  asio::io_context io;
  tcp::acceptor acceptor{io};
  const tcp::endpoint target;
  const std::string host;  // where it listens
  std::uint16_t port = 0;  // read by the test thread, so kept apart from the acceptor the I/O thread uses
  std::atomic<std::int64_t> delay_ms{0};
  std::array<std::atomic<std::uint64_t>, 2> cut_after{unlimited, unlimited};
  std::atomic<std::uint64_t> faulty_budget{unlimited};
  std::shared_ptr<link_state> link = std::make_shared<link_state>();
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> cut{0};
  std::array<std::atomic<std::uint64_t>, 2> bytes{0, 0};
  std::mutex heads_mutex;
  std::vector<std::string> heads;  // each connection's first request head, as it was complete
  std::thread thread;
};

asio::awaitable<void> fault_proxy::impl::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec == asio::error::operation_aborted) co_return;
    if (ec) continue;
    ++accepted;
    asio::co_spawn(io, serve(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> fault_proxy::impl::serve(tcp::socket accepted_socket) {
  auto conn = std::make_shared<connection>(std::move(accepted_socket), take_faulty_slot());
  auto [ec] = co_await conn->server.async_connect(target, use_tuple);
  if (ec) {
    conn->reset();  // the client sees the refusal as a reset, as it would without the proxy
    co_return;
  }
  asio::co_spawn(io, pump(conn, upload), asio::detached);
  asio::co_spawn(io, pump(conn, download), asio::detached);
}

asio::awaitable<void> fault_proxy::impl::pump(std::shared_ptr<connection> conn, direction d) {
  std::vector<char> buffer(64 * 1024);
  asio::steady_timer timer(io);
  for (;;) {
    auto [read_ec, n] = co_await conn->source(d).async_read_some(asio::buffer(buffer), use_tuple);
    if (read_ec == asio::error::eof) {
      // An orderly end travels on as one: the other direction may still have data to deliver.
      boost::system::error_code ignored;
      if (!conn->closed) conn->sink(d).shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    if (read_ec) {
      conn->reset();
      co_return;
    }
    if (d == upload && !conn->head_done) {
      // The request line and headers: what a test asks of the requests (a Range header, say).
      conn->head.append(buffer.data(), std::min<std::size_t>(n, 16384));
      const auto end = conn->head.find("\r\n\r\n");
      if (end != std::string::npos || conn->head.size() >= 16384) {
        conn->head_done = true;
        if (end != std::string::npos) conn->head.resize(end);
        std::lock_guard lock(heads_mutex);
        heads.push_back(conn->head);
      }
    }
    if (const auto delay = delay_ms.load(); delay > 0) {
      timer.expires_after(std::chrono::milliseconds(delay));
      co_await timer.async_wait(use_tuple);
      if (conn->closed) co_return;
    }
    if (const auto r = link->rate.load(); r > 0) {
      timer.expires_at(link->take(d, n, r));
      co_await timer.async_wait(use_tuple);
      if (conn->closed) co_return;
    }
    // Forward at most up to the limit, so that the peer gets exactly `limit` bytes before the reset.
    const auto limit = conn->faulty ? cut_after[d].load() : unlimited;
    const auto sent = conn->forwarded[d];
    const bool cut_now = limit != unlimited && sent + n >= limit;
    const auto pass = cut_now ? static_cast<std::size_t>(limit > sent ? limit - sent : 0) : n;
    auto [write_ec, written] = co_await asio::async_write(conn->sink(d), asio::buffer(buffer.data(), pass), use_tuple);
    conn->forwarded[d] += written;
    bytes[d] += written;
    if (cut_now) ++cut;
    if (write_ec || cut_now) {
      conn->reset();
      co_return;
    }
  }
}

fault_proxy::fault_proxy(const std::string& target_host, std::uint16_t target_port, const std::string& listen_host)
    : impl_(std::make_unique<impl>(target_host, target_port, listen_host)) {
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

fault_proxy::~fault_proxy() {
  impl_->io.stop();
  impl_->thread.join();
}

std::uint16_t fault_proxy::port() const { return impl_->port; }

std::string fault_proxy::endpoint() const { return "http://" + impl_->host + ":" + std::to_string(port()); }

void fault_proxy::set_delay(std::chrono::milliseconds per_chunk) { impl_->delay_ms = per_chunk.count(); }
void fault_proxy::cut_upload_after(std::uint64_t bytes) { impl_->cut_after[upload] = bytes; }
void fault_proxy::cut_download_after(std::uint64_t bytes) { impl_->cut_after[download] = bytes; }
void fault_proxy::set_faulty_connections(std::uint64_t count) { impl_->faulty_budget = count; }
void fault_proxy::set_rate(std::uint64_t bytes_per_second) { impl_->link->rate = bytes_per_second; }
void fault_proxy::share_link_with(const fault_proxy& other) { impl_->link = other.impl_->link; }

void fault_proxy::clear_faults() {
  set_delay(std::chrono::milliseconds(0));
  cut_upload_after(unlimited);
  cut_download_after(unlimited);
  set_faulty_connections(unlimited);
  set_rate(0);
}

std::uint64_t fault_proxy::connections_accepted() const { return impl_->accepted; }
std::uint64_t fault_proxy::connections_cut() const { return impl_->cut; }
std::uint64_t fault_proxy::bytes_uploaded() const { return impl_->bytes[upload]; }
std::uint64_t fault_proxy::bytes_downloaded() const { return impl_->bytes[download]; }

std::vector<std::string> fault_proxy::request_heads() const {
  std::lock_guard lock(impl_->heads_mutex);
  return impl_->heads;
}

}  // namespace ferry::test
