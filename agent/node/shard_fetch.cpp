#include "agent/node/shard_fetch.hpp"

#include "agent/node/entry_name.hpp"
#include "agent/node/error.hpp"
#include "agent/node/id_check.hpp"
#include "agent/node/shard_tee.hpp"
#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/retry.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

namespace ferry::agent::node {
namespace {

// A shard up to this size comes whole in one GET: two round trips cost more than the bytes.
constexpr std::uint64_t whole_limit = 1 << 20;

error_code fail(errc code, diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(code);
}

class shard_reader {
 public:
  shard_reader(tracing::action& act, fetch_context& ctx, const shard_source& shard, std::string_view layer,
               layer_writer& writer, url_parts url, std::string_view token)
      : act_(act), ctx_(ctx), shard_(shard), layer_(layer), url_(std::move(url)), token_(token),
        tee_(ctx.serve_dir, shard.sha256), checked_(writer, shard.is_piece() ? std::optional(shard.piece_offset) : std::nullopt) {}

  asio::awaitable<result<shard_outcome>> run(diagnostics& diag) {
    if (shard_.bytes < 22) co_return fail(errc::bad_zip, diag, fmt::format("{} is {} bytes: too short for a zip", layer_, shard_.bytes));
    if (shard_.bytes <= whole_limit) co_return co_await whole(diag);
    co_return co_await ranged(diag);
  }

 private:
  // GETs bytes [first, last] (all when `last` is 0) into `out`, or streams them to `sink`. A transfer cut
  // short goes on from where the bytes received end, with a Range request, up to the plan's attempts more
  // times (net/retry, each a resume action): what came is never asked for again, and the sink (the running
  // hash, the zip stream) carries on over the rest, so the checks still cover the whole shard.
  asio::awaitable<result<void>> get(std::uint64_t first, std::uint64_t last, std::string* out,
                                    const net::async_body_sink* sink, diagnostics& diag) {
    std::uint64_t received = 0;
    if (out) out->clear();
    auto r = co_await get_from(first, last, received, out, sink, diag);
    if (r || !resumable(r.error())) co_return r;
    const config::retry_settings policy{ctx_.limits.attempts, std::chrono::milliseconds(ctx_.limits.retry_base_ms),
                                        std::chrono::milliseconds(ctx_.limits.retry_max_ms)};
    co_return co_await net::with_retry<void>(
        act_, action_types::node::resume, policy,
        [&](tracing::action&, net::attempt_info& info) {
          return get_from(first, last, received, out, sink, info.diag);
        },
        [](const error_code& ec) { return resumable(ec); }, diag);
  }

  static bool resumable(const error_code& ec) {
    return ec != asio::error::operation_aborted &&
           (net::is_retryable(ec) || ec == make_error_code(errc::download_failed));
  }

  // One request for what of [first, last] has not come yet (`received` bytes have), adding to `received`
  // what this one delivers.
  asio::awaitable<result<void>> get_from(std::uint64_t first, std::uint64_t last, std::uint64_t& received,
                                         std::string* out, const net::async_body_sink* sink, diagnostics& diag) {
    net::http_request request;
    request.target = url_.target;
    request.headers.set(net::http::field::host, url_.host_header);
    if (!token_.empty()) request.headers.set("x-ferry-token", token_);
    const auto to = last != 0 ? last : shard_.bytes - 1;
    const auto from = first + received;
    const bool ranged = last != 0 || received > 0;
    if (ranged) request.headers.set(net::http::field::range, fmt::format("bytes={}-{}", from, to));
    const auto asked = to - first + 1;
    const auto want = to - from + 1;
    // What is kept whole is never more than was asked for, whatever the server says it sends.
    const net::body_sink keep = [&](std::span<const char> chunk) -> error_code {
      if (out->size() + chunk.size() > asked) {
        diag.set(fmt::format("downloading {}: storage sent more than the {} bytes asked for", layer_, asked));
        return make_error_code(errc::download_failed);
      }
      out->append(chunk.data(), chunk.size());
      received += chunk.size();
      downloaded_ += chunk.size();
      return {};
    };
    // Only what the sink took counts as received: a chunk it refused is not there to resume after.
    const net::async_body_sink pass = [&](std::span<const char> chunk) -> asio::awaitable<error_code> {
      const auto ec = co_await (*sink)(chunk);
      if (!ec) {
        received += chunk.size();
        downloaded_ += chunk.size();
      }
      co_return ec;
    };
    auto response = co_await ctx_.http.send(url_.to, request,
                                            net::response_sink{out ? &keep : nullptr, sink ? &pass : nullptr}, diag);
    if (!response) co_return response.error();
    if (response->status != (ranged ? 206u : 200u)) {
      if (response->status / 100 == 2)
        co_return fail(errc::download_failed, diag,
                       fmt::format("downloading {}: {} answered {} to a {}request", layer_,
                                   token_.empty() ? "storage" : "the peer", response->status, ranged ? "ranged " : ""));
      co_return status_error(response->status, layer_, token_.empty() ? answerer::storage : answerer::peer, diag);
    }
    if (response->body_bytes != want)
      co_return fail(errc::download_failed, diag,
                     fmt::format("downloading {}: {} bytes came, {} were asked for", layer_,
                                 response->body_bytes, want));
    co_return result<void>{};
  }

  result<void> read_directory(std::string_view tail_bytes, diagnostics& diag) {
    auto tail = parse_tail(tail_bytes, shard_.bytes, diag);
    if (!tail) return tail.error();
    tail_ = *tail;
    return {};
  }

  // The directory's entries, checked against what the manifest says the shard holds.
  result<void> take_entries(std::string_view directory, diagnostics& diag) {
    auto entries = parse_directory(directory, tail_, diag);
    if (!entries) return entries.error();
    // Every size counts, a directory's too, and the sum saturates: a Zip64 size near 2^64 must not wrap
    // it into something small.
    // The zstd dictionary is not one of the shard's files: the manifest does not count it.
    std::uint64_t files = 0, content = 0, listed = 0;
    for (const auto& e : *entries) {
      if (e.dictionary) continue;
      ++listed;
      files += e.is_directory() ? 0 : 1;
      content = e.size > UINT64_MAX - content ? UINT64_MAX : content + e.size;
    }
    // A piece is one file's bytes, exactly as many as the plan says: the writer puts them at its offset.
    if (shard_.is_piece() && (entries->size() != 1 || entries->front().is_directory() ||
                              entries->front().is_symlink() || entries->front().size != shard_.content ||
                              entries->front().name != shard_.piece_path))
      return fail(errc::over_manifest, diag,
                  fmt::format("{} is a piece of {} bytes of {}; its zip holds {} entries of {} bytes{}", layer_,
                              shard_.content, printable_name(shard_.piece_path), entries->size(), content,
                              entries->size() == 1 ? ", named " + printable_name(entries->front().name) : ""));
    const bool said = shard_.files != 0 || shard_.content != 0;
    if (said && (files > shard_.files || content > shard_.content))
      return fail(errc::over_manifest, diag,
                  fmt::format("{} holds {} files of {} bytes; its manifest says {} files of {} bytes",
                              layer_, files, content, shard_.files, shard_.content));
    if (ctx_.limits.max_shard_content && content > ctx_.limits.max_shard_content)
      return fail(errc::over_manifest, diag,
                  fmt::format("{} expands to {} bytes, over the cap of {} (agent.max_shard_content)", layer_, content,
                              ctx_.limits.max_shard_content));
    entries_ = listed;
    stream_.emplace(std::move(*entries), tail_.directory_offset);
    return {};
  }

  result<void> check_digest(diagnostics& diag) {
    const auto got = net::to_hex(hash_.finish());
    if (got != shard_.sha256)
      return fail(errc::digest_mismatch, diag,
                  fmt::format("{} has the SHA-256 {}, not the {} its manifest names", layer_, got,
                              shard_.sha256));
    return {};
  }

  // The entries inflated have the id the workstation packed them under: anything else is not its own.
  result<void> check_id(diagnostics& diag) {
    const auto got = checked_.finish_hex();
    if (got != shard_.id)
      return fail(errc::not_packed, diag,
                  fmt::format("{}: the object in storage{} does not match what this workstation packed: its entries "
                              "have the id {}, not {}; refused, and nothing of it is kept. Someone else wrote it or "
                              "edited its manifest: remove it and the manifests naming it from storage, then pack "
                              "again",
                              layer_, shard_.key.empty() ? std::string() : " at " + shard_.key, got, shard_.id));
    return {};
  }

  asio::awaitable<result<shard_outcome>> whole(diagnostics& diag) {
    std::string zip;
    if (auto r = co_await get(0, 0, &zip, nullptr, diag); !r) co_return r.error();
    // A cancellation that came while no I/O was waiting is seen only when asked for.
    if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
    const std::string_view all(zip);
    auto opened = co_await net::offload(ctx_.pool, [&]() -> result<void> {
      hash_.update(zip);
      if (auto r = check_digest(diag); !r) return r;
      tee_.append(zip);
      const auto tail_size = std::min<std::uint64_t>(zip.size(), tail_span);
      if (auto r = read_directory(all.substr(zip.size() - tail_size), diag); !r) return r;
      return take_entries(all.substr(tail_.directory_offset, tail_.directory_size), diag);
    });
    if (!opened) co_return opened.error();
    // Inflated a slice at a time: a megabyte of zip may hold a gigabyte, and a cancellation (TERM) is heard
    // between slices, where the pool's work leaves no I/O for it to cut.
    constexpr std::size_t slice = 64 << 10;
    const auto body = all.substr(0, tail_.directory_offset);
    for (std::size_t at = 0; at < body.size(); at += slice) {
      auto fed = co_await net::offload(
          ctx_.pool, [&]() -> result<void> { return stream_->feed(body.substr(at, slice), checked_, diag); });
      if (!fed) co_return fed.error();
      if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
    }
    auto done = co_await net::offload(ctx_.pool, [&]() -> result<void> {
      if (auto r = stream_->finish(diag); !r) return r;
      if (auto r = check_id(diag); !r) return r;
      tee_.commit();  // peers are handed only what was checked here
      return result<void>{};
    });
    if (!done) co_return done.error();
    co_return shard_outcome{downloaded_, entries_};
  }

  asio::awaitable<result<shard_outcome>> ranged(diagnostics& diag) {
    const auto size = shard_.bytes;
    const auto tail_size = std::min<std::uint64_t>(size, tail_span);
    const auto tail_start = size - tail_size;
    std::string end_bytes;  // from the directory's start to the end of the zip
    if (auto r = co_await get(tail_start, size - 1, &end_bytes, nullptr, diag); !r) co_return r.error();
    if (auto r = read_directory(end_bytes, diag); !r) co_return r.error();
    if (tail_.directory_offset < tail_start) {
      std::string head;
      if (auto r = co_await get(tail_.directory_offset, tail_start - 1, &head, nullptr, diag); !r) co_return r.error();
      end_bytes.insert(0, head);
    } else {
      end_bytes.erase(0, static_cast<std::size_t>(tail_.directory_offset - tail_start));
    }
    {
      auto r = co_await net::offload(ctx_.pool, [&]() -> result<void> {
        return take_entries(std::string_view(end_bytes).substr(0, tail_.directory_size), diag);
      });
      if (!r) co_return r.error();
    }
    // The body, in order, a range at a time: each chunk is hashed and extracted on the pool while the
    // socket buffers the next.
    const net::async_body_sink sink = [&](std::span<const char> chunk) -> asio::awaitable<error_code> {
      auto r = co_await net::offload(ctx_.pool, [&]() -> result<void> {
        const std::string_view bytes(chunk.data(), chunk.size());
        hash_.update(bytes);
        tee_.append(bytes);
        return stream_->feed(bytes, checked_, diag);
      });
      if (!r) co_return r.error();
      // Most of a download's time is spent on the pool, where a cancellation finds no I/O to cut: it is
      // asked for after each chunk.
      if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
      co_return error_code{};
    };
    const auto body_end = tail_.directory_offset;
    for (std::uint64_t first = 0; first < body_end;) {
      const auto last = std::min(body_end, first + ctx_.limits.range_size) - 1;
      if (auto r = co_await get(first, last, nullptr, &sink, diag); !r) co_return r.error();
      first = last + 1;
    }
    auto done = co_await net::offload(ctx_.pool, [&]() -> result<void> {
      if (auto r = stream_->finish(diag); !r) return r;
      hash_.update(end_bytes);
      tee_.append(end_bytes);
      if (auto r = check_digest(diag); !r) return r;
      if (auto r = check_id(diag); !r) return r;
      tee_.commit();
      return result<void>{};
    });
    if (!done) co_return done.error();
    co_return shard_outcome{downloaded_, entries_};
  }

  tracing::action& act_;
  fetch_context& ctx_;
  const shard_source& shard_;
  std::string_view layer_;
  url_parts url_;
  std::string_view token_;
  shard_tee tee_;
  id_check checked_;  // in front of the layer's writer
  zip_tail tail_;
  std::optional<zip_stream> stream_;
  net::sha256_stream hash_;
  std::uint64_t downloaded_ = 0;
  std::uint64_t entries_ = 0;
};

}  // namespace

// An HTTP status as net's codes, so the retry predicate knows 5xx and 429 from 403 and 404.
error_code status_error(unsigned status, std::string_view what, answerer who, diagnostics& diag) {
  const bool peer = who == answerer::peer;
  const std::string_view why = status == 404 ? (peer ? " (it holds no copy)" : " (it is gone from storage)")
                               : status == 403 && peer ? " (it refused this job's token)"
                                                       : "";
  diag.set(fmt::format("downloading {}: {} answered HTTP {}{}", what, peer ? "the peer" : "storage", status, why));
  if (status == 429 || status == 503) return net::make_error_code(net::errc::throttled);
  if (status >= 500) return net::make_error_code(net::errc::server_error);
  if (status == 403) return net::make_error_code(net::errc::access_denied);
  if (status == 404) return net::make_error_code(net::errc::no_such_key);
  return net::make_error_code(net::errc::http_status);
}

result<url_parts> split_url(std::string_view url, diagnostics& diag) {
  auto bad = [&] {
    diag.set("a shard's URL is not http(s)://HOST[:PORT]/PATH");
    return result<url_parts>(boost::system::in_place_error, make_error_code(errc::bad_plan));
  };
  url_parts out;
  std::string_view rest;
  if (url.starts_with("http://")) {
    out.to.scheme = "http";
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    out.to.scheme = "https";
    rest = url.substr(8);
  } else {
    return bad();
  }
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return bad();
  const auto authority = rest.substr(0, slash);
  out.host_header.assign(authority);
  out.target.assign(rest.substr(slash));
  std::string_view host = authority;
  std::string_view port;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return bad();
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return bad();
      port = authority.substr(close + 2);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty() || authority.find('@') != std::string_view::npos) return bad();
  out.to.host.assign(host);
  out.to.port = out.to.tls() ? 443 : 80;
  if (!port.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) return bad();
    out.to.port = static_cast<std::uint16_t>(value);
  }
  return out;
}

asio::awaitable<result<shard_outcome>> fetch_shard(tracing::action& act, fetch_context& ctx, const shard_source& shard,
                                                   std::string_view label, layer_writer& writer, diagnostics& diag,
                                                   std::string_view token) {
  auto url = split_url(shard.url, diag);
  if (!url) co_return url.error();
  shard_reader reader(act, ctx, shard, label, writer, std::move(*url), token);
  auto got = co_await reader.run(diag);
  // Every failure names the shard: the zip's and the transport's own words do not.
  if (!got && diag.message.find(label) == std::string::npos) diag.set(fmt::format("{}: {}", label, diag.message));
  co_return got;
}

}  // namespace ferry::agent::node
