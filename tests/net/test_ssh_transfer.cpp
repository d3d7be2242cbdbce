// Files through exec channels against a real sshd: uploads and downloads of a few MiB with their
// checksums, and failed transfers that leave nothing at the target path.
#include "ssh_harness.hpp"

#include "net/error.hpp"
#include "net/shell_quote.hpp"
#include "net/ssh_transfer.hpp"
#include "tracing/action_types.hpp"

#include "support/process.hpp"
#include "support/quoted.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fstream>
#include <random>
#include <sys/stat.h>

namespace ferry::net {
namespace {

using namespace asio::experimental::awaitable_operators;
using ssh_transfer = ssh_server_test;

std::string random_bytes(std::size_t size, unsigned seed) {
  std::string out(size, '\0');
  std::mt19937 rng(seed);
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

std::string sha256sum(const std::filesystem::path& file) {
  const auto r = test::run({"sha256sum", file.string()});
  return r.out.substr(0, 64);
}

// Files in `dir` other than `keep`: leftovers of a transfer.
std::vector<std::string> leftovers(const std::filesystem::path& dir, const std::string& keep = "") {
  std::vector<std::string> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename() != keep) out.push_back(entry.path().filename().string());
  return out;
}

TEST_F(ssh_transfer, uploads_and_downloads_a_few_mib_with_their_checksums) {
  const auto payload = random_bytes((5 << 20) + 123, 5);
  const auto local = dir.write("payload.bin", payload);
  const auto remote_dir = server.dir() / "remote" / "deeper";
  const auto remote = (remote_dir / "payload.bin").string();
  const auto from_memory = (remote_dir / "from memory.txt").string();
  const auto back = dir / "back" ;
  std::filesystem::create_directories(back);

  struct outcome {
    result<transfer_result> up = error_code{}, up_memory = error_code{}, down = error_code{};
  };
  diagnostics diag;
  auto o = run([](ssh_transfer& t, std::filesystem::path l, std::string r, std::string m, std::filesystem::path b,
                  diagnostics& d) -> asio::awaitable<outcome> {
    outcome out;
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return out;
    out.up = co_await upload_file(t.trace.root(), **session, l, r, d, 0755);
    const std::string text = "hello 'remote' $(world)\n";
    out.up_memory = co_await upload(t.trace.root(), **session, text, m, d);
    out.down = co_await download_file(t.trace.root(), **session, r, b / "payload.bin", d);
    co_return out;
  }(*this, local, remote, from_memory, back, diag));

  ASSERT_TRUE(o.up) << diag.message;
  EXPECT_EQ(o.up->bytes, payload.size());
  EXPECT_EQ(o.up->sha256, sha256sum(local));
  EXPECT_EQ(test::read_file(remote), payload);
  struct stat st {};
  ASSERT_EQ(::stat(remote.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_TRUE(o.up_memory) << diag.message;
  EXPECT_EQ(test::read_file(from_memory), "hello 'remote' $(world)\n");
  EXPECT_EQ(leftovers(remote_dir, "payload.bin").size(), 1u) << "only the two uploaded files";

  ASSERT_TRUE(o.down) << diag.message;
  EXPECT_EQ(o.down->bytes, payload.size());
  EXPECT_EQ(o.down->sha256, sha256sum(local));
  EXPECT_EQ(test::read_file(back / "payload.bin"), payload);
  EXPECT_TRUE(leftovers(back, "payload.bin").empty());
  const auto text = trace_text();
  EXPECT_NE(text.find(test::quoted(action_types::ssh::upload)), std::string::npos);
  EXPECT_NE(text.find(test::quoted(action_types::ssh::download)), std::string::npos);
}

// Sends the upload's remote side `bytes` and then `trailer` instead of the right checksum line.
asio::awaitable<result<command_output>> raw_upload(ssh_transfer& t, std::string remote, std::string bytes,
                                                   std::string trailer, diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  const auto size = bytes.size();
  co_return co_await run_command(t.trace.root(), **session, upload_command(remote, size, 0644), diag,
                                 bytes + trailer);
}

TEST_F(ssh_transfer, a_corrupted_upload_leaves_no_file_at_the_target) {
  const auto remote_dir = server.dir() / "target";
  const auto remote = (remote_dir / "file").string();
  const auto bytes = random_bytes(1 << 20, 9);
  const std::string wrong = std::string(64, '0') + "\n";
  diagnostics diag;
  auto r = run(raw_upload(*this, remote, bytes, wrong, diag));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_NE(r->exit.status, 0);
  EXPECT_NE(r->err.find("checksum mismatch"), std::string::npos) << r->err;
  EXPECT_TRUE(leftovers(remote_dir).empty()) << "neither the target nor a temporary file may stay";

  // Data that stops short of its announced size: no checksum line ever comes.
  auto short_r = run(raw_upload(*this, remote, bytes.substr(0, 1000), "", diag));
  ASSERT_TRUE(short_r) << diag.message;
  EXPECT_NE(short_r->exit.status, 0);
  EXPECT_TRUE(leftovers(remote_dir).empty());
}

// A source that hands out `limit` bytes, then stalls until cancelled.
class stalling_source final : public input_source {
 public:
  explicit stalling_source(std::size_t limit) : left_(limit) {}
  asio::awaitable<result<std::size_t>> read(std::span<char> into) override {
    if (left_ == 0) {
      asio::steady_timer never(co_await asio::this_coro::executor, std::chrono::hours(1));
      error_code ec;
      co_await never.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      co_return error_code(asio::error::operation_aborted);
    }
    const auto n = std::min(left_, into.size());
    std::memset(into.data(), 'x', n);
    left_ -= n;
    co_return n;
  }

 private:
  std::size_t left_;
};

asio::awaitable<void> upload_until_cancelled(ssh_transfer& t, ssh_session& session, std::string remote,
                                             error_code& ec) {
  stalling_source source(3 << 20);
  exec_request request{upload_command(remote, 8 << 20, 0644), &source, nullptr};
  diagnostics diag;
  auto r = co_await exec(t.trace.root(), session, request, diag);
  ec = r ? error_code{} : r.error();
}

// Waits, then notes what the upload has written so far.
asio::awaitable<void> look_after(std::chrono::milliseconds delay, std::filesystem::path remote_dir,
                                 std::uintmax_t& partial_bytes) {
  asio::steady_timer timer(co_await asio::this_coro::executor, delay);
  co_await timer.async_wait(asio::use_awaitable);
  for (const auto& entry : std::filesystem::directory_iterator(remote_dir)) partial_bytes += entry.file_size();
}

asio::awaitable<std::vector<std::string>> interrupted_upload(ssh_transfer& t, std::filesystem::path remote_dir,
                                                             std::uintmax_t& partial_bytes, error_code& ec,
                                                             diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) {
    ec = session.error();
    co_return std::vector<std::string>{};
  }
  auto uploading = upload_until_cancelled(t, **session, (remote_dir / "file").string(), ec);
  auto waiting = look_after(1s, remote_dir, partial_bytes);
  co_await (std::move(uploading) || std::move(waiting));
  co_return leftovers(remote_dir);
}

TEST_F(ssh_transfer, an_interrupted_upload_leaves_no_file_at_the_target) {
  const auto remote_dir = server.dir() / "interrupted";
  std::filesystem::create_directories(remote_dir);
  error_code ec;
  diagnostics diag;
  std::uintmax_t partial_bytes = 0;
  const auto left = run(interrupted_upload(*this, remote_dir, partial_bytes, ec, diag));
  EXPECT_EQ(ec, asio::error::operation_aborted) << diag.message;
  // The temporary file held (some of) what was sent when the upload was cancelled.
  EXPECT_GT(partial_bytes, 0u);
  EXPECT_LE(partial_bytes, 3u << 20);
  EXPECT_TRUE(left.empty()) << left.front();
  EXPECT_TRUE(leftovers(remote_dir).empty());
}

TEST_F(ssh_transfer, downloading_a_missing_file_fails_and_leaves_nothing) {
  const auto back = dir / "back";
  std::filesystem::create_directories(back);
  diagnostics diag;
  auto r = run([](ssh_transfer& t, std::filesystem::path b,
                  diagnostics& d) -> asio::awaitable<result<transfer_result>> {
    auto session = co_await t.connect(t.server, d);
    if (!session) co_return session.error();
    co_return co_await download_file(t.trace.root(), **session, "/no/such/file", b / "file", d);
  }(*this, back, diag));
  EXPECT_EQ(r.error(), make_error_code(errc::transfer_failed)) << diag.message;
  EXPECT_NE(diag.message.find("/no/such/file is not a readable file"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("node-1"), std::string::npos) << diag.message;
  EXPECT_TRUE(leftovers(back).empty());
}

}  // namespace
}  // namespace ferry::net
