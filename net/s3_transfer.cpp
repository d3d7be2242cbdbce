#include "net/s3_transfer.hpp"

#include "net/partial_file.hpp"

#include "net/error.hpp"
#include "net/cancellation.hpp"
#include "net/run_all.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::net {
namespace {

struct part {
  int number = 0;
  std::vector<char> bytes;
};

// Parts travel by pointer: the channel hands over ownership and never copies the bytes.
using part_channel = asio::experimental::channel<void(error_code, std::unique_ptr<part>)>;

// What the producer and the workers of one multipart upload share.
struct upload_state {
  s3_client& s3;
  tracing::action& act;
  const std::string& bucket;
  const std::string& key;
  const std::string& upload_id;
  part_channel parts;
  std::vector<completed_part> done;
  std::uint64_t bytes = 0;
  transfer_progress* progress = nullptr;
  error_code error;
  diagnostics diag;

  // The first failure wins, and everyone waiting on the channel stops. close() alone is not enough: it
  // ends waiting receivers but leaves a producer blocked in async_send waiting for ever, with no timer
  // armed, once every worker has failed; cancel() completes that send too.
  void fail(const error_code& ec, diagnostics& d) {
    if (!error) {
      error = ec;
      diag = std::move(d);
    }
    parts.close();
    parts.cancel();
  }
};

asio::awaitable<void> produce(upload_state& st, const part_source& next) {
  // However the producer ends, the workers must learn that no more parts come.
  struct close_on_exit {
    part_channel& parts;
    ~close_on_exit() { parts.close(); }
  } closer{st.parts};
  for (int number = 1;; ++number) {
    diagnostics d;
    auto bytes = co_await next(d);
    if (!bytes) {
      st.fail(bytes.error(), d);
      co_return;
    }
    if (!*bytes) co_return;
    if (co_await cancelled()) {
      st.fail(asio::error::operation_aborted, d);
      co_return;
    }
    auto p = std::make_unique<part>(part{number, std::move(**bytes)});
    error_code ec;
    co_await st.parts.async_send(error_code{}, std::move(p), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec != asio::experimental::channel_errc::channel_closed) st.fail(as_cancellation(ec), d);
      co_return;
    }
  }
}

asio::awaitable<void> upload_parts(upload_state& st) {
  for (;;) {
    diagnostics d;
    // A cancellation that came while the last part was in flight must stop the loop here.
    if (co_await cancelled()) {
      st.fail(asio::error::operation_aborted, d);
      co_return;
    }
    error_code ec;
    auto received = co_await st.parts.async_receive(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::experimental::channel_errc::channel_closed) co_return;
    if (ec) {
      st.fail(as_cancellation(ec), d);
      co_return;
    }
    auto& p = *received;
    auto act = st.act.child(action_types::s3::upload_part, {{"part", p.number}, {"bytes", p.bytes.size()}});
    const std::span<const char> bytes(p.bytes.data(), p.bytes.size());
    const auto hash = co_await offload(st.s3.cpu(), [bytes] { return hex_sha256({bytes.data(), bytes.size()}); });
    if (co_await cancelled()) {
      act.fail(asio::error::operation_aborted, "cancelled");
      st.fail(asio::error::operation_aborted, d);
      co_return;
    }
    auto etag = co_await st.s3.upload_part(act, st.bucket, st.key, st.upload_id, p.number, bytes, hash, d);
    act.finish(etag, d);
    if (!etag) {
      st.fail(etag.error(), d);
      co_return;
    }
    st.done.push_back({p.number, *etag});
    st.bytes += p.bytes.size();
    if (st.progress) st.progress->done += p.bytes.size();
  }
}

// Runs even after cancellation (only terminal cancellation stops it): parts left behind cost money.
asio::awaitable<void> abort_upload(upload_state& st) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_terminal_cancellation());
  diagnostics d;
  co_await st.s3.abort_multipart_upload(st.act, st.bucket, st.key, st.upload_id, d);
}

error_code file_error(std::string_view doing, const std::filesystem::path& file, diagnostics& diag) {
  const int e = errno;
  diag.set(fmt::format("{} {}: {}", doing, file.string(), std::strerror(e)));
  return {e, boost::system::system_category()};
}

// Closes a file descriptor on every path out.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

asio::awaitable<result<upload_result>> upload_multipart(s3_client& s3, tracing::action& parent,
                                                        const std::string& bucket, const std::string& key,
                                                        part_source next, diagnostics& diag,
                                                        transfer_progress* progress) {
  auto act = parent.child(action_types::s3::multipart_upload, {{"bucket", bucket}, {"key", key}});
  // Shielded: a Ctrl-C during this request must not lose the id of an upload storage did create.
  auto upload_id = co_await shielded(s3.create_multipart_upload(act, bucket, key, diag));
  if (!upload_id) {
    act.fail(upload_id.error(), diag);
    co_return upload_id.error();
  }
  // No co_await inside the initializer: GCC 12 mishandles temporaries of co_await in braced lists.
  const auto io = co_await asio::this_coro::executor;
  upload_state st{s3, act, bucket, key, *upload_id, part_channel(io, 0), {}, 0, progress, {}, {}};
  std::vector<asio::awaitable<void>> tasks;
  tasks.push_back(produce(st, next));
  for (int i = 0; i < std::max(1, s3.settings().parts_in_flight); ++i) tasks.push_back(upload_parts(st));
  co_await run_all(std::move(tasks));
  // Not `a && co_await b`: GCC 12 miscompiles co_await in a short-circuit operand.
  const bool was_cancelled = co_await cancelled();
  if (!st.error && was_cancelled) st.error = asio::error::operation_aborted;

  if (!st.error) {
    auto etag = co_await s3.complete_multipart_upload(act, bucket, key, *upload_id, st.done, st.diag);
    if (etag) {
      act.succeed({{"parts", st.done.size()}, {"bytes", st.bytes}});
      co_return upload_result{*etag, st.bytes, static_cast<int>(st.done.size())};
    }
    st.error = etag.error();
  }
  co_await abort_upload(st);
  diag = std::move(st.diag);
  act.fail(st.error, diag);
  co_return st.error;
}

asio::awaitable<result<upload_result>> upload_file(s3_client& s3, tracing::action& parent,
                                                   const std::filesystem::path& file, const std::string& bucket,
                                                   const std::string& key, diagnostics& diag,
                                                   transfer_progress* progress) {
  fd_guard fd{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st {};
  if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0) co_return file_error("cannot read", file, diag);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (progress) progress->total = size;
  const auto part_size = std::max<std::uint64_t>(5 << 20, s3.settings().part_size.bytes);  // S3's minimum part
  // Up to the threshold one streamed PUT is fastest: no parts for the server to assemble afterwards.
  if (size <= std::max(part_size, s3.settings().multipart_threshold.bytes)) {
    auto etag = co_await s3.put_object(parent, bucket, key, file_region{fd.fd, 0, size}, diag);
    if (!etag) co_return etag.error();
    if (progress) progress->done = size;
    co_return upload_result{*etag, size, 0};
  }
  std::uint64_t offset = 0;
  part_source next = [&](diagnostics& d) -> asio::awaitable<result<std::optional<std::vector<char>>>> {
    if (offset >= size) co_return std::optional<std::vector<char>>{};
    const auto length = static_cast<std::size_t>(std::min(part_size, size - offset));
    const auto at = offset;
    offset += length;
    // Disk reads can block: they go to the CPU pool with the hashing.
    co_return co_await offload(s3.cpu(), [&, length, at]() -> result<std::optional<std::vector<char>>> {
      std::vector<char> bytes(length);
      for (std::size_t done = 0; done < length;) {
        const auto got = ::pread(fd.fd, bytes.data() + done, length - done, static_cast<off_t>(at + done));
        if (got <= 0) return file_error("cannot read", file, d);
        done += static_cast<std::size_t>(got);
      }
      return std::optional<std::vector<char>>(std::move(bytes));
    });
  };
  co_return co_await upload_multipart(s3, parent, bucket, key, next, diag, progress);
}

asio::awaitable<result<object_info>> download_file(s3_client& s3, tracing::action& parent, const std::string& bucket,
                                                   const std::string& key, const std::filesystem::path& file,
                                                   diagnostics& diag, transfer_progress* progress) {
  auto act = parent.child(action_types::s3::download, {{"bucket", bucket}, {"key", key}});
  partial_file target(file);
  if (target.fd() < 0) {
    errno = target.error();
    auto ec = file_error("cannot create", target.temporary(), diag);
    act.fail(ec, diag);
    co_return ec;
  }

  std::uint64_t written = 0;
  error_code write_error;
  const body_sink sink = [&](std::span<const char> chunk) -> error_code {
    for (std::size_t done = 0; done < chunk.size();) {
      const auto n = ::write(target.fd(), chunk.data() + done, chunk.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return write_error = file_error("cannot write", target.temporary(), diag);
      done += static_cast<std::size_t>(n);
    }
    written += chunk.size();
    if (progress) progress->done = written;
    return {};
  };
  std::string etag;
  auto got = co_await with_retry<object_info>(
      act, action_types::s3::request, s3.retry(),
      [&](tracing::action&, attempt_info& info) -> asio::awaitable<result<object_info>> {
        s3_call c{.operation = "GetObject", .method = http::verb::get, .bucket = bucket, .key = key, .sink = &sink};
        // After a cut, ask for the rest only, and only of the same object.
        if (written > 0) c.headers = {{"range", fmt::format("bytes={}-", written)}, {"if-match", etag}};
        const auto before = written;
        auto r = co_await s3.call_once(c, info);
        if (!r) co_return r.error();
        if (etag.empty()) etag = std::string(r->headers["ETag"]);
        if (progress && progress->total == 0) progress->total = before + r->body_bytes;
        object_info out{before + r->body_bytes, etag, std::string(r->headers["Last-Modified"])};
        co_return out;
      },
      diag);
  if (!got && write_error) got = write_error;
  // The rename makes the name appear only with whole contents; like cp and curl, no fsync is paid for.
  if (got && !target.commit()) got = file_error("cannot rename into", file, diag);
  if (!got) {
    act.fail(got.error(), diag);
    co_return got.error();
  }
  act.succeed({{"bytes", written}});
  co_return got;
}

}  // namespace ferry::net
