#include "agent/node/peer_server.hpp"

#include "agent/node/error.hpp"
#include "agent/node/plan_reader.hpp"
#include "agent/node/shard_tee.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <openssl/crypto.h>

#include <charconv>
#include <filesystem>
#include <list>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::agent::node {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using namespace plan_reading;

constexpr auto poll_every = std::chrono::milliseconds(20);

struct server_state {
  const serve_request& request;
  std::string dir;
  std::string blob_dir;  // <cache>/blobs: the Python API's arguments, which the node's workers keep
  serve_outcome outcome;
  bool stopping = false;
  std::list<beast::tcp_stream*> open;  // closed when serving stops
};

bool exists(const std::string& path, std::uint64_t* size = nullptr) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (size) *size = static_cast<std::uint64_t>(st.st_size);
  return true;
}

// `<prefix><64 hex>`: the digest, or empty.
std::string digest_after(std::string_view target, std::string_view prefix) {
  if (!target.starts_with(prefix)) return {};
  const auto sha = target.substr(prefix.size());
  if (sha.size() != 64 || !is_hex(sha)) return {};
  return std::string(sha);
}

// "bytes=A-B" within `size`: [first, last]; none for no header; nullopt-range errors as `bad`.
struct byte_range {
  std::uint64_t first = 0, last = 0;
};
std::optional<byte_range> range_of(std::string_view header, std::uint64_t size, bool& bad) {
  bad = false;
  if (header.empty()) return std::nullopt;
  bad = true;
  if (!header.starts_with("bytes=")) return std::nullopt;
  const auto spec = header.substr(6);
  const auto dash = spec.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == spec.size()) return std::nullopt;
  byte_range r;
  auto a = std::from_chars(spec.data(), spec.data() + dash, r.first);
  auto b = std::from_chars(spec.data() + dash + 1, spec.data() + spec.size(), r.last);
  if (a.ec != std::errc() || b.ec != std::errc() || b.ptr != spec.data() + spec.size()) return std::nullopt;
  if (r.first > r.last || r.last >= size) return std::nullopt;
  bad = false;
  return r;
}

bool read_at(const std::string& path, std::uint64_t first, std::uint64_t count, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  out.resize(count);
  std::uint64_t done = 0;
  while (done < count) {
    const auto n = ::pread(fd, out.data() + done, count - done, static_cast<off_t>(first + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  return done == count;
}

// Waits for the shard's copy: true once it is there, false when it failed here, the wait ran out, or
// serving stops.
asio::awaitable<bool> wait_for_copy(server_state& s, const std::string& path) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.request.wait_ms);
  for (;;) {
    if (exists(path)) co_return true;
    // Failed here, or this node's materialise is over without it (a layer it had cached, one it never
    // fetched because the work ended first): it will not come from here.
    if (exists(path + ".failed") || s.stopping || std::chrono::steady_clock::now() >= deadline) co_return false;
    if (copies_are_over(s.dir)) co_return exists(path);  // (it may have come since the look above)
    timer.expires_after(poll_every);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;
  }
}

// Waits for a blob (an argument of the Python API): true once the node's worker put its checked copy in
// place. ferry asks one of this node's workers to fetch a blob before it sends a child here for it, so a
// blob that is not here yet is on its way; one whose fetch failed here (the worker leaves
// <sha256>.failed) will not come, and is refused at once.
asio::awaitable<bool> wait_for_blob(server_state& s, const std::string& path) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.request.wait_ms);
  for (;;) {
    if (exists(path)) co_return true;
    if (exists(path + ".failed") || s.stopping || std::chrono::steady_clock::now() >= deadline) co_return false;
    timer.expires_after(poll_every);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;
  }
}

using string_response = http::response<http::string_body>;

string_response plain(http::status status, unsigned version, std::string text) {
  string_response r{status, version};
  r.set(http::field::content_type, "text/plain");
  r.body() = std::move(text);
  r.prepare_payload();
  return r;
}

asio::awaitable<string_response> answer(server_state& s, const http::request<http::empty_body>& req) {
  const auto v = req.version();
  if (req.method() != http::verb::get) co_return plain(http::status::method_not_allowed, v, "GET only\n");
  const auto token = req["x-ferry-token"];
  const auto& want = s.request.token;
  if (token.size() != want.size() || CRYPTO_memcmp(token.data(), want.data(), want.size()) != 0)
    co_return plain(http::status::forbidden, v, "no\n");
  std::string path;
  std::string_view type = "application/zip";
  if (const auto blob = digest_after(req.target(), "/blobs/"); !blob.empty()) {
    path = s.blob_dir + "/" + blob;
    type = "application/octet-stream";
    if (!co_await wait_for_blob(s, path)) co_return plain(http::status::not_found, v, "not here: ask storage\n");
  } else {
    const auto sha = digest_after(req.target(), "/shards/");
    if (sha.empty()) co_return plain(http::status::not_found, v, "no such shard\n");
    path = s.dir + "/" + sha;
    if (!co_await wait_for_copy(s, path)) co_return plain(http::status::not_found, v, "not here: ask storage\n");
  }
  std::uint64_t size = 0;
  if (!exists(path, &size)) co_return plain(http::status::not_found, v, "not here: ask storage\n");
  bool bad = false;
  const auto range = range_of(req[http::field::range], size, bad);
  if (bad) co_return plain(http::status::range_not_satisfiable, v, "bad range\n");
  const auto first = range ? range->first : 0;
  const auto count = range ? range->last - range->first + 1 : size;
  string_response r{range ? http::status::partial_content : http::status::ok, v};
  if (!read_at(path, first, count, r.body())) co_return plain(http::status::not_found, v, "not here: ask storage\n");
  if (range) r.set(http::field::content_range, fmt::format("bytes {}-{}/{}", range->first, range->last, size));
  r.set(http::field::content_type, type);
  r.prepare_payload();
  co_return r;
}

asio::awaitable<void> serve_connection(server_state& s, tcp::socket socket) {
  co_await net::accept_cancellation();
  beast::tcp_stream stream(std::move(socket));
  s.open.push_back(&stream);
  const auto me = std::prev(s.open.end());
  const auto timeout = std::chrono::milliseconds(s.request.limits.read_timeout_ms);
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::empty_body> req;
    stream.expires_after(timeout);
    error_code ec;
    co_await http::async_read(stream, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    ++s.outcome.requests;
    auto r = co_await answer(s, req);
    const bool ok = r.result() == http::status::ok || r.result() == http::status::partial_content;
    (ok ? s.outcome.served : s.outcome.refused) += 1;
    if (ok) s.outcome.bytes += r.body().size();
    r.keep_alive(req.keep_alive());
    stream.expires_after(timeout);
    co_await http::async_write(stream, r, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !req.keep_alive() || s.stopping) break;
  }
  s.open.erase(me);
  error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

asio::awaitable<void> accept_loop(server_state& s, tcp::acceptor& acceptor) {
  co_await net::accept_cancellation();
  auto io = co_await asio::this_coro::executor;
  for (;;) {
    error_code ec;
    auto socket = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || s.stopping) co_return;
    // Owned by the server: serve_shards waits for every connection to end before it returns.
    asio::co_spawn(io, serve_connection(s, std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> stop_at_input_end(server_state& s, tcp::acceptor& acceptor, input_watch& input_ended) {
  co_await net::accept_cancellation();
  co_await input_ended();
  s.stopping = true;
  error_code ignored;
  acceptor.close(ignored);
  for (auto* stream : s.open) stream->socket().cancel(ignored);
}

}  // namespace

asio::awaitable<result<serve_outcome>> serve_shards(tracing::action& act, const serve_request& request,
                                                    input_watch input_ended, diagnostics& diag) {
  auto io = co_await asio::this_coro::executor;
  server_state s{request, serve_dir_of(request.cache_dir, request.serve_id), request.cache_dir + "/blobs", {}, false, {}};
  tcp::acceptor acceptor(io);
  error_code ec;
  const tcp::endpoint at(asio::ip::make_address(request.bind), 0);
  acceptor.open(at.protocol(), ec);
  if (!ec) acceptor.bind(at, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    diag.set(fmt::format("cannot listen on {}: {}", request.bind, ec.message()));
    co_return make_error_code(errc::serve_failed);
  }
  act.log(action_types::node::listening, {{"port", acceptor.local_endpoint().port()}});
  std::vector<asio::awaitable<void>> both;
  both.push_back(accept_loop(s, acceptor));
  both.push_back(stop_at_input_end(s, acceptor, input_ended));
  co_await net::run_all(std::move(both));
  // Connections still open end at their next step (a wait for a copy looks at `stopping` each time).
  asio::steady_timer pause(io);
  while (!s.open.empty()) {
    for (auto* stream : s.open) stream->socket().cancel(ec);
    pause.expires_after(poll_every);
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  // The copies go with the job.
  std::error_code fs_ec;
  std::filesystem::remove_all(s.dir, fs_ec);
  co_return s.outcome;
}

}  // namespace ferry::agent::node
