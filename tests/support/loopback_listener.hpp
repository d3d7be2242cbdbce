#pragma once
// A TCP socket listening on 127.0.0.1 at a port the kernel picks: how the tests' scripted servers begin
// (a fake HTTP server, a greeter, a silent or a full listener, an echo server).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ferry::test {

struct loopback_listener {
  int fd = -1;  // the caller's to close
  std::uint16_t port = 0;
};

// Throws std::runtime_error naming `who` when it cannot listen.
inline loopback_listener listen_on_loopback(const std::string& who, int backlog = 16) {
  loopback_listener out;
  out.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  if (out.fd < 0 || ::bind(out.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(out.fd, backlog) != 0 || ::getsockname(out.fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    if (out.fd >= 0) ::close(out.fd);
    throw std::runtime_error(who + ": cannot listen on 127.0.0.1");
  }
  out.port = ntohs(addr.sin_port);
  return out;
}

}  // namespace ferry::test
