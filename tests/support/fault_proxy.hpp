#pragma once
// A TCP proxy that injects network faults between a client under test and its server, since this
// kernel has no `tc netem`: put it between ferry and moto_server and point ferry at endpoint().
//
// It listens on 127.0.0.1 (an ephemeral port) and forwards each accepted connection to the target, on
// a thread of its own. Faults can change while traffic flows; each chunk reads them afresh:
// - a delay added before each chunk is forwarded, in both directions;
// - a cut per direction: once that many bytes of a connection went that way, both of its sockets are
//   closed abruptly (SO_LINGER 0, so the peers see a reset, not an orderly end);
// - which connections are cut: the next K accepted (so that a retry on a fresh connection succeeds),
//   or all of them;
// - a rate per direction, shared by every connection as one link is (a workstation's uplink): each chunk
//   waits until the link would have carried the chunks before it.
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace ferry::test {

class fault_proxy {
 public:
  static constexpr std::uint64_t unlimited = std::numeric_limits<std::uint64_t>::max();

  // `target_host` is an IP address (IPv4 or IPv6). It listens on `listen_host` (IPv4): 10.200.0.1, the
  // local nodes' bridge, puts it where nodes reach it too.
  fault_proxy(const std::string& target_host, std::uint16_t target_port, const std::string& listen_host = "127.0.0.1");
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  std::uint16_t port() const;
  std::string endpoint() const;  // "http://LISTEN_HOST:PORT"

  // Faults; safe to call from any thread while the proxy runs.
  void set_delay(std::chrono::milliseconds per_chunk);
  void cut_upload_after(std::uint64_t bytes);    // client -> server; `unlimited` turns the cut off
  void cut_download_after(std::uint64_t bytes);  // server -> client
  // Cuts apply to the next `count` connections accepted from now on, and to none after them;
  // `unlimited` (the default) makes every connection subject to them. Open connections keep their lot.
  void set_faulty_connections(std::uint64_t count);
  // Bytes per second each way, for all connections together; 0 (the default): as fast as they go.
  void set_rate(std::uint64_t bytes_per_second);
  // Makes this proxy's connections share `other`'s link (its rate and what it carries), as the
  // connections of one workstation to several hosts share its uplink. Call before traffic flows.
  void share_link_with(const fault_proxy& other);
  void clear_faults();  // no delay, no cuts, no rate, every connection faulty again

  // Counters since the proxy started.
  std::uint64_t connections_accepted() const;
  std::uint64_t connections_cut() const;
  std::uint64_t bytes_uploaded() const;    // forwarded client -> server
  std::uint64_t bytes_downloaded() const;  // forwarded server -> client
  // The head (request line and headers, without the blank line) of the first request on each connection,
  // in the order they were complete.
  std::vector<std::string> request_heads() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ferry::test
