#pragma once
// What the SSH tests share: an io_context to run coroutines on, a trace, ferry's SSH options pointed at
// a temporary config directory (its own key and known_hosts there), and a real sshd.
#include "net/cancellation.hpp"
#include "net/ssh_connect.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_keys.hpp"

#include "support/settings.hpp"
#include "support/sshd.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace ferry::net {

namespace asio = boost::asio;
using namespace std::chrono_literals;

// Public members: the tests' coroutines are free functions that reach into their fixture.
class ssh_harness : public ::testing::Test {
 public:
  ssh_harness() {
    options.settings = test::default_settings(dir.path()).ssh;
    options.settings.kex = "curve25519-sha256";
    options.settings.connect_timeout = 5s;
    options.config_dir = dir / "config";
    options.known_hosts = dir / "config" / "known_hosts";
  }

  // ferry's own key, made on first use and authorized on `server`.
  void authorize(const test::sshd_server& server) {
    diagnostics diag;
    auto line = ensure_own_key(options.config_dir, diag);
    if (!line) throw std::runtime_error(diag.message);
    server.authorize(*line);
  }

  static ssh_peer peer_of(const test::sshd_server& server, std::string node = "node-1") {
    return {std::move(node), server.host(), server.port(), "root"};
  }

  // Runs `work` on the io_context to its end, with cancellation as ferry's coroutines see it.
  template <class T>
  T run(asio::awaitable<T> work) {
    auto done = asio::co_spawn(io, accepting(std::move(work)), asio::use_future);
    io.run();
    io.restart();
    return done.get();
  }

  asio::awaitable<result<std::shared_ptr<ssh_session>>> connect(const test::sshd_server& server, diagnostics& diag,
                                                                std::string node = "node-1") {
    co_return co_await ssh_connect(trace.root(), peer_of(server, std::move(node)), options, diag);
  }

  std::string trace_text() { return trace.flushed_text(); }

  test::temp_dir dir;
  test::trace_root trace{dir / "trace.jsonl", "test"};
  asio::io_context io;
  ssh_client_options options;

 private:
  template <class T>
  static asio::awaitable<T> accepting(asio::awaitable<T> work) {
    co_await accept_cancellation();
    co_return co_await std::move(work);
  }
};

// A server per test, with ferry's key on it.
class ssh_server_test : public ssh_harness {
 public:
  ssh_server_test() { authorize(server); }
  test::sshd_server server;
};

}  // namespace ferry::net
