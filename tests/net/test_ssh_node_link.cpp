// The node link over SSH (net/ssh_node_link.hpp): a command run as another Unix user, and a long-lived
// duplex channel whose input depends on its output, against a real sshd.
#include "ssh_harness.hpp"

#include "net/deadline.hpp"
#include "net/error.hpp"
#include "net/ssh_exec.hpp"
#include "net/ssh_node_link.hpp"

#include "support/process.hpp"

#include <boost/asio/this_coro.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ferry::net {
namespace {

using ssh_node_link_test = ssh_server_test;

TEST(run_as_command, wraps_the_command_in_sudo_with_both_quoted) {
  EXPECT_EQ(run_as_command("tenant-1", "echo it's $HOME"),
            R"(sudo -n -u 'tenant-1' -- /bin/sh -c 'echo it'\''s $HOME')");
}

// sh splits the line back into sudo's arguments and the very command: a stand-in sudo (first on PATH)
// shows what it was given, then runs the rest as the real one would.
TEST(run_as_command, the_shell_hands_sudo_the_user_and_the_command_byte_for_byte) {
  test::temp_dir dir;
  const auto fake = dir / "sudo";
  std::ofstream(fake) << "#!/bin/sh\nprintf '%s|' \"$1\" \"$2\" \"$3\" \"$4\"\nshift 4\nexec \"$@\"\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const auto line = run_as_command("o'brien x", R"(printf '[%s]' "it's" '$HOME' "a  b")");
  const auto r = test::run({"/bin/sh", "-c", line},
                           {.env = {{"PATH", dir.path().string() + ":" + std::getenv("PATH")}}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "-n|-u|o'brien x|--|[it's][$HOME][a  b]");
}

// Replies to each line the command echoes with the next request, and ends the input after the last: a
// worker's protocol, where nothing is written before the previous answer came.
class ping_pong final : public output_sink {
 public:
  ping_pong(stream_source& requests, std::size_t rounds) : requests_(requests), rounds_(rounds) {}

  asio::awaitable<error_code> write(output_stream stream, std::span<const char> bytes) override {
    if (stream == output_stream::err) co_return error_code{};
    seen.append(bytes.data(), bytes.size());
    while (answered_ < rounds_ && seen.size() >= (answered_ + 1) * 2) {
      ++answered_;
      if (answered_ == rounds_) {
        requests_.close();
      } else {
        requests_.write(std::string(1, static_cast<char>('a' + answered_)) + "\n");
      }
    }
    co_return error_code{};
  }

  std::string seen;

 private:
  stream_source& requests_;
  std::size_t rounds_;
  std::size_t answered_ = 0;
};

asio::awaitable<result<exit_info>> talk_to_a_worker(ssh_node_link_test& t, std::string& seen,
                                                      diagnostics& diag) {
  auto session = co_await t.connect(t.server, diag);
  if (!session) co_return session.error();
  ssh_node_link link(*session);
  stream_source requests(co_await asio::this_coro::executor);
  ping_pong replies(requests, 5);
  requests.write("a\n");
  const exec_request request{"while IFS= read -r line; do sleep 0.1; printf '%s\\n' \"$line\"; done", &requests, &replies};
  // Each reply comes a moment after its request, when the channel has long gone back to its input. A
  // channel that then waited for input before it read the output would never end: the deadline says so.
  auto done = co_await with_deadline(link.exec(t.trace.root(), request, diag), 20s);
  seen = replies.seen;
  link.close();
  if (!done) {
    diag.set("the exchange stalled after " + seen);
    co_return make_error_code(errc::timeout);
  }
  co_return *done;
}

TEST_F(ssh_node_link_test, a_duplex_channel_writes_its_input_as_its_output_comes) {
  diagnostics diag;
  std::string seen;
  auto r = run(talk_to_a_worker(*this, seen, diag));
  ASSERT_TRUE(r) << diag.message;
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(seen, "a\nb\nc\nd\ne\n");
}

}  // namespace
}  // namespace ferry::net
