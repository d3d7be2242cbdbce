#include "net/s3_transfer.hpp"

#include "net/partial_file.hpp"

#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/multipart_upload_core.hpp"
#include "net/notifier.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <list>
#include <map>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::net {
namespace {

// One operation the core asked for, while it runs: the signal that passes cancellations on to it.
struct running_op {
  asio::cancellation_signal signal;
  cancelled_by stops = cancelled_by::any;
  bool done = false;  // its completion handler ran: its coroutine is gone
};

// What the operations of one multipart upload share with the loop that drives them. Everything runs on
// the caller's executor, so the operations report to the core directly and then wake the loop.
struct upload_run {
  s3_client& s3;
  tracing::action& act;
  const std::string& bucket;
  const std::string& key;
  const part_source& next;
  transfer_progress* progress;
  multipart_upload_core core;
  notifier wake;  // an operation ended: the loop looks again
  std::map<int, std::vector<char>> parts;  // read, not yet sent or released
  std::list<running_op> running;
  asio::cancellation_type_t heard = asio::cancellation_type::none;
  std::exception_ptr bug;  // the first exception an operation threw, rethrown once all have ended
};

// The core's code for an operation that threw: the upload winds down, then the exception is rethrown.
error_code thrown() { return make_error_code(boost::system::errc::state_not_recoverable); }

asio::awaitable<void> create_upload(upload_run& run) {
  diagnostics d;
  auto id = co_await run.s3.create_multipart_upload(run.act, run.bucket, run.key, d);
  if (id) run.core.created(std::move(*id));
  else run.core.create_failed(id.error(), std::move(d));
}

asio::awaitable<void> read_part(upload_run& run, int number) {
  co_await accept_cancellation();
  diagnostics d;
  auto bytes = co_await run.next(d);
  if (!bytes) {
    run.core.source_failed(bytes.error(), std::move(d));
  } else if (!*bytes) {
    run.core.source_ended();
  } else {
    const auto size = (*bytes)->size();
    run.parts[number] = std::move(**bytes);
    run.core.part_read(number, size);
  }
}

asio::awaitable<void> send_part(upload_run& run, int number) {
  co_await accept_cancellation();
  const auto held = run.parts.find(number);
  const auto p = std::move(held->second);
  run.parts.erase(held);
  auto act = run.act.child(action_types::s3::upload_part, {{"part", number}, {"bytes", p.size()}});
  const std::span<const char> bytes(p.data(), p.size());
  const auto hash = co_await offload(run.s3.cpu(), [bytes] { return hex_sha256({bytes.data(), bytes.size()}); });
  diagnostics d;
  // Hashing does not hear a cancellation: ask before the request starts.
  if (co_await cancelled()) {
    act.fail(asio::error::operation_aborted, "cancelled");
    run.core.part_failed(number, asio::error::operation_aborted, std::move(d));
    co_return;
  }
  auto etag = co_await run.s3.upload_part(act, run.bucket, run.key, run.core.upload_id(), number, bytes, hash, d);
  act.finish(etag, d);
  if (!etag) {
    run.core.part_failed(number, etag.error(), std::move(d));
    co_return;
  }
  if (run.progress) run.progress->done += p.size();
  run.core.part_sent(number, std::move(*etag));
}

asio::awaitable<void> complete_upload(upload_run& run, std::vector<completed_part> parts) {
  co_await accept_cancellation();
  diagnostics d;
  auto etag = co_await run.s3.complete_multipart_upload(run.act, run.bucket, run.key, run.core.upload_id(),
                                                        std::move(parts), d);
  if (etag) run.core.completed(std::move(*etag));
  else run.core.complete_failed(etag.error(), std::move(d));
}

asio::awaitable<void> abort_upload(upload_run& run) {
  co_await accept_cancellation();
  diagnostics d;
  auto r = co_await run.s3.abort_multipart_upload(run.act, run.bucket, run.key, run.core.upload_id(), d);
  if (r) run.core.aborted();
  else run.core.abort_failed(r.error(), std::move(d));
}

// Runs `op` beside the others. `on_throw` tells the core the operation failed when it threw instead of
// reporting (a bug), so that the upload still winds down before the exception goes on.
template <class OnThrow>
void start(upload_run& run, asio::awaitable<void> op, cancelled_by stops, OnThrow on_throw) {
  auto& r = run.running.emplace_back();
  r.stops = stops;
  auto ended = [&run, &r, on_throw](const std::exception_ptr& e) {
    if (e) {
      if (!run.bug) run.bug = e;
      on_throw();
    }
    r.done = true;
    run.wake.notify();
  };
  const auto io = run.wake.get_executor();
  if (stops == cancelled_by::nothing) {
    asio::co_spawn(io, std::move(op), std::move(ended));
    return;
  }
  asio::co_spawn(io, std::move(op), asio::bind_cancellation_slot(r.signal.slot(), std::move(ended)));
}

void carry_out(upload_run& run, multipart_action& a) {
  using kind = multipart_action::kind;
  const int n = a.part;
  switch (a.what) {
    case kind::create:
      return start(run, create_upload(run), a.stops, [&run] { run.core.create_failed(thrown(), {}); });
    case kind::read_part:
      return start(run, read_part(run, n), a.stops, [&run] { run.core.source_failed(thrown(), {}); });
    case kind::send_part:
      return start(run, send_part(run, n), a.stops, [&run, n] { run.core.part_failed(n, thrown(), {}); });
    case kind::release_part:
      run.parts.erase(n);
      return;
    case kind::complete:
      return start(run, complete_upload(run, std::move(a.parts)), a.stops,
                   [&run] { run.core.complete_failed(thrown(), {}); });
    case kind::abort:
      return start(run, abort_upload(run), a.stops, [&run] { run.core.abort_failed(thrown(), {}); });
    case kind::finish:
      return;
  }
}

// A cancellation of the caller, heard once: the core learns it, and each running operation that listens
// to that kind gets it too.
void pass_on(upload_run& run, asio::cancellation_type_t now) {
  const auto fresh = now & ~run.heard;
  if (fresh == asio::cancellation_type::none) return;
  run.heard |= fresh;
  run.core.cancelled(kind_of(fresh));
  for (auto& r : run.running) {
    if (r.done || r.stops == cancelled_by::nothing) continue;
    if (r.stops == cancelled_by::any) r.signal.emit(fresh);
    else if (is_terminal(fresh)) r.signal.emit(asio::cancellation_type::terminal);
  }
}

// Carries out the core's actions until it has finished and every operation it started has ended.
asio::awaitable<void> drive(upload_run& run) {
  for (;;) {
    const auto seen = run.wake.notifications();
    const auto state = co_await asio::this_coro::cancellation_state;
    pass_on(run, state.cancelled());
    for (auto& a : run.core.next()) carry_out(run, a);
    run.running.remove_if([](const running_op& r) { return r.done; });
    if (run.core.done() && run.running.empty()) co_return;
    // An operation that ended while the loop was busy has already said so.
    if (run.wake.notifications() != seen) continue;
    error_code ec;  // woken or cancelled: either way the loop looks again
    co_await run.wake.wait(ec);
  }
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
  const auto io = co_await asio::this_coro::executor;
  // No co_await inside the initializer: GCC 12 mishandles temporaries of co_await in braced lists.
  upload_run run{s3, act, bucket, key, next, progress, multipart_upload_core(s3.settings().parts_in_flight),
                 notifier(io)};
  co_await drive(run);
  if (run.bug) std::rethrow_exception(run.bug);
  const auto& core = run.core;
  if (core.failure()) {
    diag = core.failure_diagnostics();
    act.fail(core.failure(), diag);
    co_return core.failure();
  }
  act.succeed({{"parts", static_cast<std::size_t>(core.parts())}, {"bytes", core.bytes()}});
  co_return upload_result{core.etag(), core.bytes(), core.parts()};
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
  const s3_call about{.operation = "GetObject", .method = http::verb::get, .bucket = bucket, .key = key};
  auto got = co_await s3.watched(act, about, with_retry<object_info>(
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
      diag), diag);
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
