#include "net/ssh_transfer.hpp"

#include "net/partial_file.hpp"

#include "net/digest.hpp"
#include "net/error.hpp"
#include "net/shell_quote.hpp"
#include "net/ssh_exec.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::net {
namespace {

constexpr std::size_t max_error_text = 4096;  // of the node's stderr, for the message
constexpr std::size_t max_header = 256;

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

error_code transfer_error(diagnostics& diag, std::string text) {
  diag.set(std::move(text));
  return make_error_code(errc::transfer_failed);
}

// Stdin of an upload: the bytes (from memory or a file), then their SHA-256 and a newline.
class upload_source final : public input_source {
 public:
  upload_source(std::span<const char> bytes) : memory_(bytes), size_(bytes.size()) {}
  upload_source(int fd, std::uint64_t size) : fd_(fd), size_(size) {}

  asio::awaitable<result<std::size_t>> read(std::span<char> into) override {
    if (sent_ < size_) co_return read_data(into);
    if (trailer_.empty() && !trailer_sent_) {
      trailer_ = to_hex(hash_.finish()) + "\n";
      digest_ = trailer_.substr(0, trailer_.size() - 1);
      trailer_sent_ = true;
    }
    const auto n = std::min(into.size(), trailer_.size());
    std::memcpy(into.data(), trailer_.data(), n);
    trailer_.erase(0, n);
    co_return n;
  }

  const std::string& digest() const { return digest_; }

 private:
  result<std::size_t> read_data(std::span<char> into) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(into.size(), size_ - sent_));
    std::size_t got = want;
    if (fd_ >= 0) {
      const auto n = ::pread(fd_, into.data(), want, static_cast<off_t>(sent_));
      // A file that shrank since its size was taken: the node must not get a short file with a good hash.
      if (n <= 0) return error_code(n < 0 ? errno : EIO, boost::system::system_category());
      got = static_cast<std::size_t>(n);
    } else {
      std::memcpy(into.data(), memory_.data() + sent_, want);
    }
    hash_.update({into.data(), got});
    sent_ += got;
    return got;
  }

  std::span<const char> memory_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t sent_ = 0;
  sha256_stream hash_;
  std::string trailer_;
  bool trailer_sent_ = false;
  std::string digest_;
};

// Keeps the head of the node's stderr, for the message when the transfer fails.
void keep_error_text(std::string& text, std::span<const char> bytes) {
  text.append(bytes.data(), std::min(bytes.size(), max_error_text - std::min(max_error_text, text.size())));
}

class upload_sink final : public output_sink {
 public:
  asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) override {
    if (stream == output_stream::err) keep_error_text(errors, bytes);
    co_return error_code{};
  }
  std::string errors;
};

// Stdout of a download: "ferry-download <sha256> <size>\n", then the file, which goes to `fd`.
class download_sink final : public output_sink {
 public:
  explicit download_sink(int fd) : fd_(fd) {}

  asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) override {
    if (stream == output_stream::err) {
      keep_error_text(errors, bytes);
      co_return error_code{};
    }
    if (!header_done_) bytes = take_header(bytes);
    if (!bytes.empty()) co_return store(bytes);
    co_return error_code{};
  }

  bool header_done() const { return header_done_; }
  const std::string& expected_sha256() const { return expected_sha256_; }
  std::uint64_t expected_size() const { return expected_size_; }
  std::uint64_t received() const { return received_; }
  std::string sha256() { return to_hex(hash_.finish()); }
  error_code write_error;
  std::string errors;

 private:
  std::span<const char> take_header(std::span<const char> bytes) {
    const std::string_view text(bytes.data(), bytes.size());
    const auto newline = text.find('\n');
    header_.append(text.substr(0, newline));
    if (newline == std::string_view::npos) {
      if (header_.size() > max_header) header_done_ = true;  // not ours: parse_header fails below
      return {};
    }
    header_done_ = true;
    parse_header();
    return bytes.subspan(newline + 1);
  }

  void parse_header() {
    constexpr std::string_view tag = "ferry-download ";
    if (header_.rfind(tag, 0) != 0) return;
    const auto space = header_.find(' ', tag.size());
    if (space == std::string::npos) return;
    expected_sha256_ = header_.substr(tag.size(), space - tag.size());
    const char* first = header_.data() + space + 1;
    std::from_chars(first, header_.data() + header_.size(), expected_size_);
  }

  error_code store(std::span<const char> bytes) {
    hash_.update({bytes.data(), bytes.size()});
    received_ += bytes.size();
    for (std::size_t done = 0; done < bytes.size();) {
      const auto n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return write_error = error_code(errno, boost::system::system_category());
      done += static_cast<std::size_t>(n);
    }
    return {};
  }

  int fd_;
  std::string header_;
  bool header_done_ = false;
  std::string expected_sha256_;
  std::uint64_t expected_size_ = 0;
  std::uint64_t received_ = 0;
  sha256_stream hash_;
};

std::string download_command(const std::string& remote_path) {
  return fmt::format(
      "f={0}; if [ ! -f \"$f\" ] || [ ! -r \"$f\" ]; then echo \"ferry download: $f is not a readable file\" >&2; "
      "exit 2; fi; h=$(sha256sum < \"$f\") && n=$(wc -c < \"$f\") || exit 2; "
      "printf 'ferry-download %s %s\\n' \"${{h%% *}}\" \"$((n))\" && exec cat -- \"$f\"",
      shell_quote(remote_path));
}

// Why an upload or download the node ran failed, in its words.
error_code remote_failure(const exit_info& exit, const std::string& errors, std::string_view doing,
                          const ssh_session& session, diagnostics& diag) {
  auto text = errors;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return transfer_error(diag, fmt::format("{} on {} failed ({}){}{}", doing, session.peer().describe(),
                                          exit.describe(), text.empty() ? "" : ": ", text));
}

asio::awaitable<result<transfer_result>> send(tracing::action& act, ssh_session& session, upload_source& source,
                                              std::uint64_t size, const std::string& remote_path, unsigned mode,
                                              diagnostics& diag) {
  upload_sink sink;
  exec_request request{upload_command(remote_path, size, mode), &source, &sink};
  auto r = co_await exec(act, session, request, diag);
  if (!r) co_return r.error();
  if (!r->success()) co_return remote_failure(*r, sink.errors, fmt::format("uploading {}", remote_path), session, diag);
  co_return transfer_result{size, source.digest()};
}

asio::awaitable<result<transfer_result>> traced_upload(tracing::action& parent, ssh_session& session,
                                                       upload_source& source, std::uint64_t size,
                                                       const std::string& remote_path, unsigned mode,
                                                       diagnostics& diag) {
  auto act = parent.child(action_types::ssh::upload,
                          {{"node", session.peer().node}, {"path", remote_path}, {"bytes", size}});
  auto r = co_await send(act, session, source, size, remote_path, mode, diag);
  if (!r)
    act.fail(r.error(), diag);
  else
    act.succeed({{"sha256", r->sha256}});
  co_return r;
}

}  // namespace

std::string upload_command(const std::string& remote_path, std::uint64_t size, unsigned mode) {
  // The EXIT trap removes the temporary file on every way out, signals included (each trap exits, and
  // exiting runs the EXIT trap); after the rename there is nothing left to remove.
  return fmt::format(
      "f={0}; t=\"$f.ferry-upload.$$\"; trap 'rm -f \"$t\"' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; "
      "trap 'exit 143' TERM; trap 'exit 141' PIPE; "
      "d=$(dirname -- \"$f\") && mkdir -p -- \"$d\" && head -c {1} > \"$t\" || exit 1; "
      "if ! IFS= read -r want; then echo \"ferry upload: the data for $f stopped short\" >&2; exit 1; fi; "
      "got=$(sha256sum < \"$t\") || exit 1; got=${{got%% *}}; "
      "if [ \"$got\" != \"$want\" ]; then "
      "echo \"ferry upload: checksum mismatch for $f: sent $want, received $got\" >&2; exit 1; fi; "
      "chmod {2:o} \"$t\" && mv -f -- \"$t\" \"$f\"",
      shell_quote(remote_path), size, mode);
}

asio::awaitable<result<transfer_result>> upload(tracing::action& parent, ssh_session& session,
                                                std::span<const char> bytes, const std::string& remote_path,
                                                diagnostics& diag, unsigned mode) {
  upload_source source(bytes);
  co_return co_await traced_upload(parent, session, source, bytes.size(), remote_path, mode, diag);
}

asio::awaitable<result<transfer_result>> upload_file(tracing::action& parent, ssh_session& session,
                                                     const std::filesystem::path& local,
                                                     const std::string& remote_path, diagnostics& diag,
                                                     unsigned mode) {
  fd_guard fd{::open(local.c_str(), O_RDONLY | O_CLOEXEC)};
  struct stat st {};
  if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0)
    co_return transfer_error(diag, fmt::format("cannot read {}: {}", local.string(), std::strerror(errno)));
  upload_source source(fd.fd, static_cast<std::uint64_t>(st.st_size));
  co_return co_await traced_upload(parent, session, source, static_cast<std::uint64_t>(st.st_size), remote_path,
                                   mode, diag);
}

namespace {

// Runs the download into `fd` and checks what came: the node's exit, its size and checksum.
asio::awaitable<result<transfer_result>> receive(tracing::action& act, ssh_session& session,
                                                 const std::string& remote_path, int fd,
                                                 const std::filesystem::path& temporary, diagnostics& diag) {
  download_sink sink(fd);
  exec_request request{download_command(remote_path), nullptr, &sink};
  auto r = co_await exec(act, session, request, diag);
  const auto doing = fmt::format("downloading {}", remote_path);
  if (!r && sink.write_error)
    co_return transfer_error(diag, fmt::format("cannot write {}: {}", temporary.string(), sink.write_error.message()));
  if (!r) co_return r.error();
  if (!r->success()) co_return remote_failure(*r, sink.errors, doing, session, diag);
  if (!sink.header_done() || sink.expected_sha256().empty())
    co_return transfer_error(diag, fmt::format("{} on {}: the node did not say the file's size and checksum", doing,
                                               session.peer().describe()));
  const auto got = sink.sha256();
  if (sink.received() != sink.expected_size() || got != sink.expected_sha256())
    co_return transfer_error(diag, fmt::format("{} on {}: received {} bytes with SHA-256 {}, the node sent {} bytes "
                                               "with SHA-256 {} (did the file change meanwhile?)",
                                               doing, session.peer().describe(), sink.received(), got,
                                               sink.expected_size(), sink.expected_sha256()));
  co_return transfer_result{sink.received(), got};
}

}  // namespace

asio::awaitable<result<transfer_result>> download_file(tracing::action& parent, ssh_session& session,
                                                       const std::string& remote_path,
                                                       const std::filesystem::path& local, diagnostics& diag) {
  auto act = parent.child(action_types::ssh::download, {{"node", session.peer().node}, {"path", remote_path}});
  partial_file file(local);
  if (file.fd() < 0) {
    const auto ec = transfer_error(diag, fmt::format("cannot create {}: {}", file.temporary().string(),
                                                     std::strerror(file.error())));
    act.fail(ec, diag);
    co_return ec;
  }
  auto out = co_await receive(act, session, remote_path, file.fd(), file.temporary(), diag);
  // The rename makes the name appear only with whole, verified contents.
  if (out && !file.commit())
    out = transfer_error(diag, fmt::format("cannot rename {} to {}: {}", file.temporary().string(), local.string(),
                                           std::strerror(errno)));
  if (!out) {
    act.fail(out.error(), diag);
    co_return out;
  }
  act.succeed({{"bytes", out->bytes}, {"sha256", out->sha256}});
  co_return out;
}

}  // namespace ferry::net
