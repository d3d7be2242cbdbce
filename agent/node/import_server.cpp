#include "agent/node/import_server.hpp"

#include "agent/node/content_dir.hpp"
#include "agent/node/error.hpp"
#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "packaging/unique_fd.hpp"
#include "tracing/action_types.hpp"
#include "tracing/sink.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/array.hpp>
#include <boost/json/value_from.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

using stream = asio::local::stream_protocol;

constexpr std::size_t max_request = 1 << 20;  // an `imported` line of a few thousand names

std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < line.size()) {
    const auto end = line.find(' ', at);
    const auto w = line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (!w.empty()) out.emplace_back(w);
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return out;
}

}  // namespace

import_server::import_server(asio::any_io_executor io, import_gate& gate, prefer_fn prefer, std::string dir)
    : gate_(gate), prefer_(std::move(prefer)), dir_(std::move(dir)), path_(dir_ + "/s"), acceptor_(io),
      changed_(io), drained_(io) {
}

import_server::~import_server() {
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
}

result<std::unique_ptr<import_server>> import_server::open(asio::any_io_executor io, import_gate& gate,
                                                           prefer_fn prefer, diagnostics& diag) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp && *tmp && std::strlen(tmp) < 64 ? tmp : "/tmp";
  std::string templ = base + "/ferry-import-XXXXXX";
  bool made = ::mkdtemp(templ.data()) != nullptr;
  if (!made && base != "/tmp") {  // a TMPDIR that is not there: /tmp then
    base = "/tmp";
    templ = base + "/ferry-import-XXXXXX";
    made = ::mkdtemp(templ.data()) != nullptr;
  }
  if (!made) {
    diag.set(fmt::format("cannot create a directory in {} for the import hook's socket: {}", base,
                         std::strerror(errno)));
    return make_error_code(errc::cache_failed);
  }
  std::unique_ptr<import_server> server(new import_server(io, gate, std::move(prefer), templ));
  error_code ec;
  server->acceptor_.open(stream(), ec);
  if (!ec) server->acceptor_.bind(stream::endpoint(server->path_), ec);
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    diag.set(fmt::format("cannot listen on {}: {}", server->path_, ec.message()));
    return make_error_code(errc::cache_failed);
  }
  return server;
}

void import_server::changed() { changed_.notify(); }

void import_server::close() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  for (auto& c : open_)
    if (c.reading) c.socket->close(ignored);
  // Requests that wait are answered as things stand: what has not landed says so, and the import fails
  // with that rather than with a connection cut.
  changed();
}

asio::awaitable<bool> import_server::wait_change(std::uint64_t seen) {
  while (gate_.generation() == seen && !closed_) {
    error_code ec;
    co_await changed_.wait(ec);
    if (co_await net::cancelled()) co_return false;
  }
  co_return !closed_;
}

asio::awaitable<void> import_server::serve(tracing::action& act) {
  auto io = co_await asio::this_coro::executor;
  while (!closed_) {
    error_code ec;
    stream::socket socket(io);
    co_await acceptor_.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || closed_) break;
    ++connections_;
    // Owned by this server: close() closes each connection, and serve() waits for the last to end.
    asio::co_spawn(io, answer(act, std::move(socket)), [this](std::exception_ptr e) {
      if (e && !bug_) bug_ = e;  // rethrown by serve(), once every connection has ended
      if (--connections_ == 0 && closed_) drained_.notify();
    });
  }
  close();
  while (connections_ > 0) {
    error_code ec;
    co_await drained_.wait(ec);
    // Cancelled (the program is stopping): whatever a connection waits for (a peer that reads nothing)
    // ends now; each then ends at once.
    if (co_await net::cancelled()) {
      error_code ignored;
      for (auto& c : open_) c.socket->close(ignored);
      // The connections' ends are waited for all the same: their frames refer to this server.
      co_await asio::this_coro::reset_cancellation_state();
    }
  }
  if (bug_) std::rethrow_exception(bug_);
}

asio::awaitable<void> import_server::answer(tracing::action& act, stream::socket socket) {
  // Listed for as long as it lives: close() ends it while it reads its request (a request that waits is
  // answered instead), and a cancelled drain ends it whatever it does.
  struct listed {
    std::list<connection>& open;
    std::list<connection>::iterator it;
    ~listed() { open.erase(it); }
  } listing{open_, open_.insert(open_.end(), connection{&socket, true})};
  if (closed_) co_return;
  asio::streambuf in(max_request);
  error_code ec;
  const auto n = co_await asio::async_read_until(socket, in, '\n', asio::redirect_error(asio::use_awaitable, ec));
  listing.it->reading = false;
  if (ec || closed_) co_return;
  std::string line(asio::buffers_begin(in.data()), asio::buffers_begin(in.data()) + static_cast<std::ptrdiff_t>(n - 1));
  const auto w = words(line);
  std::string reply;
  if (!w.empty() && w[0] == "hello") {
    if (!started_) {
      started_ = true;
      act.log(action_types::node::command_started, {{"pid", w.size() > 1 ? w[1] : std::string()}});
    }
    reply = gate_.hello_reply();
  } else if (w.size() == 3 && w[0] == "want") {
    const auto layers = gate_.holders(w[1], w[2]);
    if (!gate_.settled(layers)) {
      const auto names = gate_.names(layers);
      const auto ids = gate_.ids(layers);
      // The ids tell ferry which layers to hurry if they are not in storage yet.
      auto wait = act.child(action_types::node::import_wait, {{"kind", w[1]}, {"name", w[2]}, {"layers", names},
                                                             {"ids", boost::json::value_from(ids)}});
      act.output().nudge();
      const auto begin = std::chrono::steady_clock::now();
      if (prefer_) prefer_(ids);
      bool open = true;
      while (open && !gate_.settled(layers)) open = co_await wait_change(gate_.generation());
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - begin).count();
      std::string failed;
      for (auto i : layers)
        if (gate_.state_of(i) != import_gate::state::ready) failed += (failed.empty() ? "" : ", ") + gate_.names({i});
      if (failed.empty()) {
        wait.succeed({{"waited_ms", waited}});
      } else {
        wait.fail(make_error_code(errc::download_failed), fmt::format("layer {} did not arrive", failed),
                  {{"waited_ms", waited}});
      }
    }
    reply = gate_.states_reply();
  } else if (!w.empty() && w[0] == "imported") {
    gate_.imported(std::vector<std::string>(w.begin() + 1, w.end()));
    reply = "{}\n";
  } else {
    reply = "{\"error\":\"unknown request\"}\n";
  }
  co_await asio::async_write(socket, asio::buffer(reply), asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace ferry::agent::node
