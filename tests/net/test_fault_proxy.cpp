// The fault-injecting proxy: exact pass-through, cuts at a byte count in each direction, the first-K
// rule, delays that still deliver; against an echo server of plain sockets, and moto with the aws CLI.
#include "support/fault_proxy.hpp"
#include "support/loopback_listener.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ferry::test {
namespace {

using namespace std::chrono_literals;

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Sends all of `data`; 0, or the errno of the send that failed.
int send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const auto n = ::send(fd, data.data(), std::min<std::size_t>(data.size(), 64 * 1024), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

// A TCP server on 127.0.0.1 that sends every connection's bytes back until the client ends it.
class echo_server {
 public:
  echo_server() {
    const auto listener = test::listen_on_loopback("echo_server");
    listen_fd_ = listener.fd;
    port_ = listener.port;
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~echo_server() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    ::close(listen_fd_);
    std::lock_guard lock(mutex_);
    for (const int fd : connections_) ::shutdown(fd, SHUT_RDWR);
    for (auto& worker : workers_) worker.join();
    for (const int fd : connections_) ::close(fd);
  }

  std::uint16_t port() const { return port_; }

 private:
  void accept_loop() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      std::lock_guard lock(mutex_);
      connections_.push_back(fd);
      workers_.emplace_back([fd] { echo(fd); });
    }
  }

  static void echo(int fd) {
    char buffer[64 * 1024];
    for (;;) {
      const auto n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || send_all(fd, {buffer, static_cast<std::size_t>(n)}) != 0) break;
    }
    // Ends the stream but keeps the descriptor until the destructor, so that its number is not reused
    // while the destructor may still shut it down.
    ::shutdown(fd, SHUT_WR);
  }

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<int> connections_;
  std::vector<std::thread> workers_;
};

struct exchange_result {
  std::string received;
  int read_errno = 0;   // 0 when reading ended at an orderly end of stream
  int write_errno = 0;  // 0 when all of the payload was sent

  // Whether the client saw a reset. The kernel reports a reset once, to whichever call comes first: a
  // send that was under way gets ECONNRESET and leaves the next recv to see a plain end of stream.
  bool reset() const {
    return read_errno == ECONNRESET || write_errno == ECONNRESET || write_errno == EPIPE;
  }
};

// Connects to 127.0.0.1:port, sends `payload` (then ends the sending side) while reading everything
// that comes back until the connection ends, in order or not.
exchange_result exchange(std::uint16_t port, const std::string& payload) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const auto addr = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to the proxy");
  }
  exchange_result out;
  std::thread writer([&] {
    out.write_errno = send_all(fd, payload);
    if (out.write_errno == 0) ::shutdown(fd, SHUT_WR);
  });
  char buffer[64 * 1024];
  for (;;) {
    const auto n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) out.read_errno = errno;
    if (n <= 0) break;
    out.received.append(buffer, static_cast<std::size_t>(n));
  }
  ::shutdown(fd, SHUT_RDWR);  // unblocks the writer if the proxy stopped reading
  writer.join();
  ::close(fd);
  return out;
}

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 generator(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(generator());
  return out;
}

TEST(fault_proxy, passes_megabytes_through_exactly_both_ways) {
  echo_server server;
  fault_proxy proxy("127.0.0.1", server.port());
  const auto payload = random_bytes(4 << 20, 1);
  const auto r = exchange(proxy.port(), payload);
  EXPECT_FALSE(r.reset());
  EXPECT_EQ(r.read_errno, 0);
  ASSERT_EQ(r.received.size(), payload.size());
  EXPECT_TRUE(r.received == payload);
  EXPECT_EQ(proxy.connections_accepted(), 1u);
  EXPECT_EQ(proxy.connections_cut(), 0u);
  EXPECT_EQ(proxy.bytes_uploaded(), payload.size());
  EXPECT_EQ(proxy.bytes_downloaded(), payload.size());
}

TEST(fault_proxy, cuts_the_download_at_the_configured_byte_count) {
  echo_server server;
  fault_proxy proxy("127.0.0.1", server.port());
  proxy.cut_download_after(100'000);
  const auto payload = random_bytes(1 << 20, 2);
  const auto r = exchange(proxy.port(), payload);
  EXPECT_TRUE(r.reset()) << "the client must see a reset, not an orderly end";
  EXPECT_LE(r.received.size(), 100'000u);
  EXPECT_TRUE(r.received == payload.substr(0, r.received.size()));
  EXPECT_EQ(proxy.bytes_downloaded(), 100'000u);
  EXPECT_EQ(proxy.connections_cut(), 1u);
}

TEST(fault_proxy, cuts_the_upload_at_the_configured_byte_count) {
  echo_server server;
  fault_proxy proxy("127.0.0.1", server.port());
  proxy.cut_upload_after(50'000);
  const auto payload = random_bytes(1 << 20, 3);
  const auto r = exchange(proxy.port(), payload);
  EXPECT_TRUE(r.reset());
  EXPECT_LE(r.received.size(), 50'000u);  // the echo can only return what reached the server
  EXPECT_TRUE(r.received == payload.substr(0, r.received.size()));
  EXPECT_EQ(proxy.bytes_uploaded(), 50'000u);
  EXPECT_EQ(proxy.connections_cut(), 1u);
}

TEST(fault_proxy, cuts_only_the_first_k_connections) {
  echo_server server;
  fault_proxy proxy("127.0.0.1", server.port());
  const auto warm_up = exchange(proxy.port(), "before any fault");
  EXPECT_EQ(warm_up.received, "before any fault");

  proxy.set_faulty_connections(2);
  proxy.cut_download_after(10);
  const auto payload = random_bytes(100'000, 4);
  for (int i = 0; i < 2; ++i) {
    const auto cut = exchange(proxy.port(), payload);
    EXPECT_TRUE(cut.reset()) << "connection " << i;
    EXPECT_LE(cut.received.size(), 10u);
  }
  for (int i = 0; i < 2; ++i) {
    const auto clean = exchange(proxy.port(), payload);
    EXPECT_FALSE(clean.reset());
    EXPECT_TRUE(clean.received == payload) << "connection " << i + 2 << " got " << clean.received.size();
  }
  EXPECT_EQ(proxy.connections_accepted(), 5u);
  EXPECT_EQ(proxy.connections_cut(), 2u);
}

TEST(fault_proxy, delayed_chunks_still_arrive_whole_and_faults_clear) {
  echo_server server;
  fault_proxy proxy("127.0.0.1", server.port());
  proxy.set_delay(5ms);
  proxy.cut_upload_after(1);
  proxy.set_faulty_connections(0);  // cuts set, but no connection subject to them
  const auto payload = random_bytes(256 * 1024, 5);
  auto r = exchange(proxy.port(), payload);
  EXPECT_FALSE(r.reset());
  EXPECT_EQ(r.read_errno, 0);
  EXPECT_TRUE(r.received == payload);

  proxy.set_faulty_connections(fault_proxy::unlimited);
  r = exchange(proxy.port(), payload);
  EXPECT_TRUE(r.reset());

  proxy.clear_faults();
  r = exchange(proxy.port(), payload);
  EXPECT_FALSE(r.reset());
  EXPECT_EQ(r.read_errno, 0);
  EXPECT_TRUE(r.received == payload);
  EXPECT_EQ(proxy.connections_cut(), 1u);
}

// The rate is the link's, shared by its connections: two exchanges at once still arrive whole. What the
// link carried per second is printed, not asserted on.
TEST(fault_proxy, a_rate_limited_link_carries_every_byte_of_connections_side_by_side) {
  echo_server server;
  fault_proxy proxy("127.0.0.1", server.port());
  constexpr std::uint64_t rate = 8 << 20;
  proxy.set_rate(rate);
  const auto a = random_bytes(2 << 20, 6);
  const auto b = random_bytes(2 << 20, 7);
  const auto start = std::chrono::steady_clock::now();
  exchange_result ra, rb;
  std::thread other([&] { rb = exchange(proxy.port(), b); });
  ra = exchange(proxy.port(), a);
  other.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(ra.reset());
  EXPECT_FALSE(rb.reset());
  EXPECT_TRUE(ra.received == a);
  EXPECT_TRUE(rb.received == b);
  EXPECT_EQ(proxy.bytes_uploaded(), a.size() + b.size());
  std::printf("4 MiB each way through a link of %llu bytes/s: %.2f s, %.1f MB/s each way\n",
              static_cast<unsigned long long>(rate), seconds, static_cast<double>(a.size() + b.size()) / seconds / 1e6);
  proxy.clear_faults();
}

TEST(fault_proxy, refused_target_resets_the_client) {
  const auto closed_port = pick_free_port();
  fault_proxy proxy("127.0.0.1", closed_port);
  const auto r = exchange(proxy.port(), "hello");
  EXPECT_TRUE(r.received.empty());
  EXPECT_TRUE(r.reset());
  EXPECT_EQ(proxy.connections_accepted(), 1u);
}

// Real HTTP through the proxy: the aws CLI uploads to moto, then a download whose first connection is
// cut succeeds on curl's retry, which needs a fresh connection.
TEST(fault_proxy, real_clients_through_the_proxy_and_a_retry_after_a_cut) {
  moto_server moto;
  fault_proxy proxy("127.0.0.1", moto.port());
  temp_dir dir;
  const auto payload = random_bytes(3 << 20, 6);
  const auto source = dir.write("source.bin", payload);
  moto.make_bucket("ferry-proxy");

  auto r = run({"aws", "--endpoint-url", proxy.endpoint(), "s3", "cp", source.string(), "s3://ferry-proxy/blob"},
               moto.process_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(proxy.bytes_uploaded(), payload.size());

  // A presigned GET, as nodes download layers; moto checks no signature while auth is off.
  r = run({"aws", "--endpoint-url", proxy.endpoint(), "s3", "presign", "s3://ferry-proxy/blob"}, moto.process_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto url = r.out.substr(0, r.out.find_last_not_of("\r\n") + 1);
  const auto target = dir / "copy.bin";
  proxy.set_faulty_connections(1);
  proxy.cut_download_after(64 * 1024);
  r = run({"curl", "-sS", "--fail", "--retry", "2", "--retry-all-errors", "-o", target.string(), url});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_file(target) == payload);
  EXPECT_EQ(proxy.connections_cut(), 1u);  // so the whole file came over the second connection
  EXPECT_GE(proxy.connections_accepted(), 3u);
}

}  // namespace
}  // namespace ferry::test
