// agent/materialise/layer_feed.hpp: what a node's reader says beside the feed's lines is the feed's own state of that
// node, changed through the feed, which wakes the readers: a held node gets no layer line until its source
// is known (a peer line first) or it is released; a lazy reader ends with a work_done line once the
// node's work is done; other nodes' readers go on as before.
#include "agent/materialise/layer_feed.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <vector>

// Named: the test binaries are unity builds, and other files' helpers share these names.
namespace ferry::agent::layer_feed_tests {
namespace {

namespace asio = boost::asio;

struct reading {
  std::string text;  // what was read, blank lines (a lazy reader's keep-alives) left out
  bool ended = false;
};

// A coroutine function, not a lambda: a lambda's captures would die with it before the coroutine ends.
asio::awaitable<void> read_all(net::input_source& in, reading& r) {
  std::array<char, 4096> buf{};
  for (;;) {
    auto n = co_await in.read(buf);
    if (!n || *n == 0) {
      r.ended = true;
      co_return;
    }
    for (std::size_t i = 0; i < *n; ++i)
      if (!(buf[i] == '\n' && (r.text.empty() || r.text.back() == '\n'))) r.text += buf[i];
  }
}

void start(asio::io_context& io, net::input_source& in, reading& r) {
  asio::co_spawn(io, read_all(in, r), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
}

// Runs whatever is ready, without waiting for anything.
void settle(asio::io_context& io) {
  io.restart();
  io.poll();
}

const node::layer_source alpha{"aa", "alpha", {}};
const std::string url = "http://10.0.0.1:9000";

std::string line(const std::string& text) { return text + "\n"; }

// One feed on one io_context; each reader reads into a `reading` until the test ends.
class layer_feed_test : public ::testing::Test {
 protected:
  reading& read(std::string header, std::string node, bool lazy = false) {
    readers_.push_back(feed_.reader(std::move(header), std::move(node), lazy));
    auto& r = readings_.emplace_back();
    start(io_, *readers_.back(), r);
    return r;
  }
  void settle() { agent::layer_feed_tests::settle(io_); }
  // The one layer stored, and the plan's end.
  void stored_and_ended() {
    feed_.add(0, alpha);
    feed_.end(1, std::nullopt);
  }

  asio::io_context io_;
  layer_feed feed_{io_.get_executor()};
  std::vector<std::unique_ptr<net::input_source>> readers_;
  std::deque<reading> readings_;
};

TEST_F(layer_feed_test, a_held_node_gets_its_layers_once_its_source_is_known_and_the_peer_line_first) {
  feed_.add(0, alpha);
  feed_.fan_out("child", "", true);
  auto& h = read("H1", "child");
  auto& o = read("H2", "seed");
  settle();
  EXPECT_TRUE(feed_.held("child"));
  EXPECT_FALSE(feed_.held("seed"));
  EXPECT_EQ(h.text, line("H1"));
  EXPECT_EQ(o.text, line("H2") + line(node::layer_line(0, alpha)));

  feed_.fan_out("child", url, false);
  settle();
  EXPECT_EQ(h.text, line("H1") + line(node::peer_line({url})) + line(node::layer_line(0, alpha)));
  EXPECT_EQ(o.text, line("H2") + line(node::layer_line(0, alpha)));  // no peer line for another node

  feed_.end(1, std::nullopt);
  settle();
  EXPECT_TRUE(h.ended);
  EXPECT_TRUE(o.ended);
}

TEST_F(layer_feed_test, a_released_node_goes_to_storage_without_a_peer_line) {
  stored_and_ended();
  feed_.fan_out("child", "", true);
  auto& h = read("H", "child");
  settle();
  EXPECT_EQ(h.text, line("H"));
  EXPECT_FALSE(h.ended);  // the feed is closed, but the held node's lines are still to come

  feed_.release("child");
  settle();
  EXPECT_FALSE(feed_.held("child"));
  EXPECT_EQ(h.text, line("H") + line(node::layer_line(0, alpha)) + line(node::end_line({1, std::nullopt})));
  EXPECT_TRUE(h.ended);
}

TEST_F(layer_feed_test, a_lazy_reader_ends_with_work_done_once_the_feed_is_told) {
  stored_and_ended();
  auto& l = read("H", "n1", true);
  auto& o = read("H", "n2", true);
  settle();
  const auto plan = line("H") + line(node::layer_line(0, alpha)) + line(node::end_line({1, std::nullopt}));
  EXPECT_EQ(l.text, plan);
  EXPECT_FALSE(l.ended);  // a lazy start's input stays open after the plan's end

  feed_.work_done("n1");
  settle();
  EXPECT_EQ(l.text, plan + line(node::work_done_line()));
  EXPECT_TRUE(l.ended);
  EXPECT_EQ(o.text, plan);  // another node's work goes on
  EXPECT_FALSE(o.ended);

  feed_.work_done("n2");
  settle();
  EXPECT_TRUE(o.ended);
}

TEST(plan_piece, a_piece_shard_travels_on_its_layer_line_and_bounds_outside_its_file_are_refused) {
  node::layer_source l{std::string(64, 'a'), "torchlike", {}};
  node::shard_source s;
  s.url = "http://storage/x";
  s.sha256 = std::string(64, 'b');
  s.id = std::string(64, 'c');
  s.bytes = 10;
  s.files = 1;
  s.content = 1000;
  s.piece_path = "lib/big.so";
  s.piece_offset = 2000;
  s.file_size = 3000;
  l.shards.push_back(s);
  diagnostics diag;
  auto parsed = node::parse_plan_line(node::layer_line(0, l), diag);
  ASSERT_TRUE(parsed) << diag.message;
  const auto& back = std::get<node::placed_layer>(*parsed).layer.shards.at(0);
  EXPECT_TRUE(back.is_piece());
  EXPECT_EQ(back.piece_path, "lib/big.so");
  EXPECT_EQ(back.piece_offset, 2000u);
  EXPECT_EQ(back.file_size, 3000u);

  l.shards[0].piece_offset = 2001;  // its 1000 bytes would end past the file's 3000
  auto past = node::parse_plan_line(node::layer_line(0, l), diag);
  ASSERT_FALSE(past);
  EXPECT_NE(diag.message.find("not a piece of that file"), std::string::npos) << diag.message;
  l.shards[0].piece_offset = 0;
  l.shards[0].files = 2;
  EXPECT_FALSE(node::parse_plan_line(node::layer_line(0, l), diag)) << "a piece is one file";
  l.shards[0].files = 1;
  l.shards[0].piece_path.clear();
  EXPECT_FALSE(node::parse_plan_line(node::layer_line(0, l), diag)) << "a piece names its file";
}

// A layer's shards stored after its line go to every reader in shard lines, in the order they came, a
// held node's too once it goes on; a reader waiting for the next shard wakes when it comes.
TEST_F(layer_feed_test, shard_lines_follow_their_layer_to_every_reader_as_they_come) {
  const node::plan_shard second{"aa", 1, "http://storage/2", std::string(64, 'b'), 7};
  feed_.add(0, alpha);
  feed_.fan_out("child", "", true);
  auto& h = read("H1", "child");
  auto& o = read("H2", "seed");
  settle();
  EXPECT_EQ(o.text, line("H2") + line(node::layer_line(0, alpha)));
  feed_.add_shard(second);
  settle();
  EXPECT_EQ(o.text, line("H2") + line(node::layer_line(0, alpha)) + line(node::shard_line(second)));
  EXPECT_FALSE(o.ended);
  feed_.release("child");
  feed_.end(1, std::nullopt);
  settle();
  const auto plan = line(node::layer_line(0, alpha)) + line(node::shard_line(second)) +
                    line(node::end_line({1, std::nullopt}));
  EXPECT_EQ(h.text, line("H1") + plan);
  EXPECT_EQ(o.text, line("H2") + plan);
  EXPECT_TRUE(h.ended);
  EXPECT_TRUE(o.ended);
}

}  // namespace
}  // namespace ferry::agent::layer_feed_tests
