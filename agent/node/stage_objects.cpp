#include "agent/node/stage_objects.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/staging_dir.hpp"
#include "net/error.hpp"
#include "net/retry.hpp"
#include "net/run_all.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <vector>

namespace ferry::agent::node {
namespace {

// How often a window looks for the files the command has deleted.
constexpr auto window_poll = std::chrono::milliseconds(20);

// An ETag is an object's MD5 unless the object came in parts ("<hex>-<parts>").
bool is_md5(std::string_view etag) {
  return etag.size() == 32 &&
         std::all_of(etag.begin(), etag.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

class md5_stream {
 public:
  md5_stream() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_md5(), nullptr); }
  void update(std::span<const char> bytes) { EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned size = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &size);
    std::string out;
    for (unsigned i = 0; i < size; ++i) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

struct stager {
  stager(fetch_context& c, const stage_request& r, staging_dir& d) : ctx(c), request(r), dir(d) {}

  fetch_context& ctx;
  const stage_request& request;
  staging_dir& dir;
  stage_outcome outcome;
  bool stop = false;  // an object failed for good: start nothing new
};

// One try at an object: its bytes into `file`, hashed on the CPU pool as they arrive.
asio::awaitable<result<void>> download(stager& s, const stage_object& o, staged_file& file, diagnostics& diag) {
  if (auto r = file.restart(diag); !r) co_return r.error();
  auto url = split_url(o.url, diag);
  if (!url) co_return url.error();
  const auto what = fmt::format("object {}", printable_name(o.path));
  const auto where = fmt::format("{} under {} ({} bytes needed)", what, s.dir.path(), o.size);
  net::http_request request;
  request.target = url->target;
  request.headers.set(net::http::field::host, url->host_header);
  md5_stream md5;
  std::uint64_t arrived = 0;
  const net::async_body_sink sink = [&](std::span<const char> chunk) -> asio::awaitable<error_code> {
    if (chunk.size() > o.size - arrived) {
      diag.set(fmt::format("downloading {}: storage sent more than its {} bytes", what, o.size));
      co_return make_error_code(errc::download_failed);
    }
    arrived += chunk.size();
    auto r = co_await net::offload(s.ctx.pool, [&]() -> result<void> {
      md5.update(chunk);
      return file.write(chunk, where, diag);
    });
    co_return r ? error_code{} : r.error();
  };
  auto response = co_await s.ctx.http.send(url->to, request, net::response_sink{nullptr, &sink}, diag);
  if (!response) co_return response.error();
  if (response->status != 200) co_return storage_status_error(response->status, what, diag);
  if (response->body_bytes != o.size) {
    diag.set(fmt::format("downloading {}: {} bytes arrived, {} expected", what, response->body_bytes, o.size));
    co_return make_error_code(errc::download_failed);
  }
  if (is_md5(o.etag)) {
    auto sum = md5.hex();
    std::string etag(o.etag);
    for (auto& c : etag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (sum != etag) {
      diag.set(fmt::format("{} arrived with the MD5 {}, not the {} of its ETag", what, sum, etag));
      co_return make_error_code(errc::digest_mismatch);
    }
  }
  co_return result<void>{};
}

bool worth_retrying(const error_code& ec) {
  return net::is_retryable(ec) || ec == make_error_code(errc::download_failed) ||
         ec == make_error_code(errc::digest_mismatch);
}

// One object, fetched (with retries) into a file of its own, not yet in place.
asio::awaitable<result<staged_file>> fetch(tracing::action& parent, stager& s, const stage_object& o,
                                           diagnostics& diag) {
  auto act = parent.child(action_types::node::stage_object, {{"path", printable_name(o.path)}, {"bytes", o.size}});
  auto file = s.dir.create(diag);
  if (!file) {
    act.fail(file.error(), diag);
    co_return file.error();
  }
  const auto& l = s.ctx.limits;
  const config::retry_settings policy{l.attempts, std::chrono::milliseconds(l.retry_base_ms),
                                      std::chrono::milliseconds(l.retry_max_ms)};
  auto got = co_await net::with_retry<void>(
      act, action_types::node::stage_attempt, policy,
      [&](tracing::action&, net::attempt_info& info) { return download(s, o, *file, info.diag); },
      [&](const error_code& ec) { return !s.stop && worth_retrying(ec); }, diag);
  if (!got) {
    act.fail(got.error(), diag);
    co_return got.error();
  }
  file->close();
  ++s.outcome.fetched;
  s.outcome.bytes += o.size;
  act.succeed();
  co_return std::move(*file);
}

// Without a window: what is there stays, the rest comes `parallelism` at a time, and is put in place only
// once all of it has arrived: the command starts with all of its data or none of what was missing.
asio::awaitable<result<void>> stage_all(tracing::action& act, stager& s, diagnostics& diag) {
  std::vector<const stage_object*> wanted;
  for (const auto& o : s.request.objects) {
    if (s.dir.holds(o))
      ++s.outcome.kept;
    else
      wanted.push_back(&o);
  }
  std::vector<std::optional<staged_file>> files(wanted.size());
  std::size_t next = 0;
  error_code first_error;
  const auto workers = std::min<std::size_t>(wanted.size(), static_cast<std::size_t>(s.ctx.limits.parallelism));
  std::vector<asio::awaitable<void>> tasks;
  for (std::size_t w = 0; w < workers; ++w) {
    tasks.push_back([](tracing::action& a, stager& st, std::vector<const stage_object*>& list,
                       std::vector<std::optional<staged_file>>& out, std::size_t& at, error_code& first,
                       diagnostics& d) -> asio::awaitable<void> {
      diagnostics mine;
      while (!st.stop && at < list.size()) {
        const auto i = at++;
        auto r = co_await fetch(a, st, *list[i], mine);
        if (r) {
          out[i].emplace(std::move(*r));
        } else if (!first) {
          first = r.error();
          d = std::move(mine);
          st.stop = true;
        }
      }
    }(act, s, wanted, files, next, first_error, diag));
  }
  co_await net::run_all(std::move(tasks));
  if (first_error) co_return first_error;
  for (std::size_t i = 0; i < wanted.size(); ++i)
    if (auto r = s.dir.place(*files[i], *wanted[i], diag); !r) co_return r.error();
  co_return result<void>{};
}

// With a window: in order, each object once it fits beside what the command has not yet deleted.
asio::awaitable<result<void>> stream_all(tracing::action& act, stager& s, diagnostics& diag) {
  s.dir.clear_complete();
  std::vector<const stage_object*> live;  // delivered, and not yet deleted by the command
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (const auto& o : s.request.objects) {
    for (;;) {
      std::uint64_t held = 0;
      std::erase_if(live, [&](const stage_object* l) { return !s.dir.present(l->path); });
      for (const auto* l : live) held += l->size;
      if (held + o.size <= s.request.window) break;
      timer.expires_after(window_poll);
      error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return ec;
    }
    auto file = co_await fetch(act, s, o, diag);
    if (!file) co_return file.error();
    if (auto r = s.dir.place(*file, o, diag); !r) co_return r.error();
    live.push_back(&o);
  }
  co_return s.dir.mark_complete(diag);
}

}  // namespace

asio::awaitable<result<stage_outcome>> stage_objects(tracing::action& parent, fetch_context& ctx,
                                                     const stage_request& request, diagnostics& diag) {
  auto dir = staging_dir::open(request.node_dir, diag);
  if (!dir) co_return dir.error();
  stager s(ctx, request, *dir);
  result<void> done;
  if (request.window)
    done = co_await stream_all(parent, s, diag);
  else
    done = co_await stage_all(parent, s, diag);
  if (!done) co_return done.error();
  co_return s.outcome;
}

}  // namespace ferry::agent::node
