// A team pool's leases in a real moto_server, taken by agents that share nothing but
// storage: eight at once lose no slot and lease none twice, a lease is renewed and given back, a crashed
// agent's lease comes back by itself when it expires, a full pool waits (or says so), and a record that
// breaks the rules is set aside without stopping the rest. `ferry pool ls` shows what storage holds.
#include "agent/error.hpp"
#include "agent/pool/pool_invariants.hpp"
#include "agent/pool/pool_lease.hpp"
#include "agent/pool/pool_store.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "tracing/action_types.hpp"

#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/run_to_end.hpp"
#include "support/settings.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

// A namespace of its own: the test binary is a unity build.
namespace ferry::agent::pool::store_tests {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test::temp_dir;

constexpr std::string_view bucket = "team-bucket";

class pool_store_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Signatures unchecked: with them checked, moto refuses a listing whose prefix holds a '/'
    // (tests/support/moto.hpp); tests/net/test_s3_conditional.cpp checks the conditional PUTs signed.
    moto_ = new test::moto_server({.serial = true});
    moto_->make_bucket(std::string(bucket));
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  // A session of its own, as another workstation's agent would have.
  net::s3_session open_session() {
    auto s = test::default_settings(dir.path());
    s.net.retry.base_delay = 1ms;
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : moto_->environment()) vars[name] = value;
    diagnostics diag;
    auto opened = net::open_s3_session(io.get_executor(), cpu, s, net::map_environment(vars), diag);
    if (!opened) throw std::runtime_error(diag.message);
    return std::move(*opened);
  }

  template <class T>
  T run(asio::awaitable<T> work) {
    return test::run_to_end(io, std::move(work));
  }

  // A pool of its own per test, named after it (a pool's name has at most 64 characters).
  static std::string pool_name() {
    return std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()).substr(0, 40);
  }
  pool_location where() const { return pool_at(std::string(bucket), "ferry", pool_name()); }

  // Registers `count` nodes of `capacity` slots, as `ferry pool up` would, each with a lease that is
  // given back at once, so that the node is idle and in the pool.
  void register_nodes(pool_store& store, int count, int capacity) {
    for (int i = 0; i < count; ++i) {
      new_node n{"local", fmt::format("local-{}", i), fmt::format("10.200.0.{}", 10 + i), 22, "root", "ssh-ed25519 AAAA", capacity};
      lease_request first{fmt::format("setup-{}", i), "admin", 1, 60, "setup"};
      auto w = register_node(node_name(i), n, wall_clock_now(), first, diag);
      ASSERT_TRUE(w) << diag.message;
      auto etag = run(store.write(trace.root(), *w, diag));
      ASSERT_TRUE(etag) << diag.message;
      ASSERT_TRUE(give_back(store, {w->node_id, *etag, w->record, w->record.leases.front()})) << diag.message;
    }
  }

  pool_snapshot read(pool_store& store) {
    diagnostics diag;
    auto s = run(store.read(trace.root(), diag));
    if (!s) throw std::runtime_error(diag.message);
    return std::move(*s);
  }

  // The calls with every argument a named object (GCC 12 destroys a braced temporary passed to a
  // coroutine's by-value parameter twice); `diag` holds the last one's diagnostics.
  result<held_lease> acquire(pool_store& store, lease_request r, acquire_settings s, pool_clock now = wall_clock_now) {
    const pool_nodes none;
    return run(acquire_lease(trace.root(), store, r, s, none, now, diag));
  }
  result<held_lease> renew(pool_store& store, held_lease held, pool_time ttl, pool_clock now = wall_clock_now) {
    return run(renew_lease(trace.root(), store, held, ttl, 4, now, diag));
  }
  result<void> give_back(pool_store& store, held_lease held) {
    const pool_clock now = wall_clock_now;
    return run(release_lease(trace.root(), store, held, 100, now, diag));
  }

  static std::vector<pool_record> records_of(const pool_snapshot& s) {
    std::vector<pool_record> out;
    for (const auto& e : s.nodes) out.push_back(e.record);
    return out;
  }

  static test::moto_server* moto_;
  temp_dir dir;
  asio::io_context io;
  net::cpu_pool cpu{1};
  test::trace_root trace{dir / "trace.jsonl", "test:pool_store"};
  diagnostics diag;
};

test::moto_server* pool_store_test::moto_ = nullptr;

acquire_settings settings_for(int max_nodes, std::chrono::seconds max_wait = 0s) {
  acquire_settings s;
  s.limits.max_nodes = max_nodes;
  s.limits.node_slots = 4;
  s.max_conflicts = 100;
  s.max_wait = max_wait;
  s.poll = 1s;
  return s;
}

struct agent_outcome {
  std::optional<held_lease> held;
  error_code ec;
  std::string message;
};

asio::awaitable<void> lease_one(pool_store& store, tracing::action& parent, lease_request r, acquire_settings s,
                                agent_outcome& out) {
  co_await net::accept_cancellation();
  diagnostics diag;
  const pool_nodes none;
  const pool_clock now = wall_clock_now;
  auto got = co_await acquire_lease(parent, store, r, s, none, now, diag);
  if (got)
    out.held = std::move(*got);
  else
    out = {std::nullopt, got.error(), diag.message};
}

TEST_F(pool_store_test, eight_agents_lease_at_once_and_no_slot_is_leased_twice) {
  auto setup = open_session();
  pool_store admin(*setup.s3, where());
  register_nodes(admin, 3, 4);  // 12 slots for 8 agents: everyone fits, and they race for the same ones

  constexpr int agents = 8;
  std::vector<net::s3_session> sessions;
  std::vector<std::unique_ptr<pool_store>> stores;
  for (int a = 0; a < agents; ++a) {
    sessions.push_back(open_session());
    stores.push_back(std::make_unique<pool_store>(*sessions.back().s3, where()));
  }
  std::vector<agent_outcome> outcomes(agents);
  std::vector<lease_request> requests;
  for (int a = 0; a < agents; ++a)
    requests.push_back({fmt::format("lease-{}", a), fmt::format("tenant-{}", a % 3), 1, 600, fmt::format("agent-{}", a)});
  const auto settings = settings_for(3);
  std::vector<asio::awaitable<void>> tasks;
  for (int a = 0; a < agents; ++a) tasks.push_back(lease_one(*stores[a], trace.root(), requests[a], settings, outcomes[a]));
  run(net::run_all(std::move(tasks)));

  const auto conflicts = trace.count(action_types::pool::write, "failed");
  std::cout << "[ storm    ] " << agents << " agents leased at once; " << conflicts
            << " writes lost to another agent's and were read again\n";
  std::set<std::string> ids;
  for (int a = 0; a < agents; ++a) {
    ASSERT_TRUE(outcomes[a].held) << a << ": " << outcomes[a].message;
    ids.insert(outcomes[a].held->granted.id);
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(agents));
  const auto after = read(admin);
  EXPECT_EQ(after.nodes.size(), 3u) << "no agent made a node: the pool had room";
  EXPECT_TRUE(check_pool(records_of(after), wall_clock_now()).empty())
      << ::testing::PrintToString(check_pool(records_of(after), wall_clock_now()));
  int used = 0;
  std::set<std::string> stored_ids;
  for (const auto& e : after.nodes) {
    used += used_slots(e.record, wall_clock_now());
    for (const auto& l : e.record.leases) stored_ids.insert(l.id);
  }
  EXPECT_EQ(used, agents) << "every lease is in storage, once";
  EXPECT_EQ(stored_ids, ids);
  // Packing: leases fill the busiest node first, so at most one node is partly used.
  int partly = 0;
  for (const auto& e : after.nodes) partly += used_slots(e.record, wall_clock_now()) % 4 != 0;
  EXPECT_LE(partly, 1);

  // Given back, every record is idle again.
  for (int a = 0; a < agents; ++a) ASSERT_TRUE(give_back(*stores[a], *outcomes[a].held)) << diag.message;
  for (const auto& e : read(admin).nodes) {
    EXPECT_TRUE(e.record.leases.empty()) << e.record.node_id;
    EXPECT_TRUE(e.record.idle_since) << e.record.node_id;
  }
}

TEST_F(pool_store_test, a_renewed_lease_moves_its_expiry_and_survives_another_agents_write) {
  auto s1 = open_session();
  auto s2 = open_session();
  pool_store mine(*s1.s3, where()), theirs(*s2.s3, where());
  register_nodes(mine, 1, 4);
  auto held = acquire(mine, {"mine", "ann", 1, 60, "a"}, settings_for(1));
  ASSERT_TRUE(held) << diag.message;
  // Another agent writes the same record in between: our renew's first If-Match fails, and it reads again.
  auto other = acquire(theirs, {"theirs", "bob", 1, 60, "b"}, settings_for(1));
  ASSERT_TRUE(other) << diag.message;
  auto renewed = renew(mine, *held, 3600);
  ASSERT_TRUE(renewed) << diag.message;
  EXPECT_GE(renewed->granted.expires_at, held->granted.expires_at + 3000);
  const auto now = read(mine);
  ASSERT_EQ(now.nodes.size(), 1u);
  ASSERT_EQ(now.nodes[0].record.leases.size(), 2u) << "the other agent's lease is kept";
  EXPECT_TRUE(check_pool(records_of(now), wall_clock_now()).empty());
}

TEST_F(pool_store_test, a_crashed_agents_lease_expires_and_the_next_agent_gets_its_slot) {
  auto s1 = open_session();
  auto s2 = open_session();
  pool_store crashed(*s1.s3, where()), next(*s2.s3, where());
  register_nodes(crashed, 1, 1);  // one slot in the whole pool
  // The agents' clock: the test moves it, so that an expiry needs no real wait.
  pool_time clock = wall_clock_now();
  const pool_clock now = [&clock] { return clock; };
  // The first agent takes the slot for 60 s and is never heard of again (no renew, no release).
  auto gone = acquire(crashed, {"crashed", "ann", 1, 60, "dead"}, settings_for(1), now);
  ASSERT_TRUE(gone) << diag.message;
  // With no wait allowed the pool is full, and says so.
  auto refused = acquire(next, {"impatient", "bob", 1, 60, "b"}, settings_for(1, 0s), now);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), errc::pool_full) << diag.message;
  EXPECT_NE(diag.message.find("no room"), std::string::npos) << diag.message;
  // Once the lease has expired, the next agent gets the slot.
  clock += 61;
  auto got = acquire(next, {"next", "bob", 1, 60, "b"}, settings_for(1, 30s), now);
  ASSERT_TRUE(got) << diag.message;
  EXPECT_EQ(got->node_id, gone->node_id);
  const auto after = read(next);
  ASSERT_EQ(after.nodes.size(), 1u);
  ASSERT_EQ(after.nodes[0].record.leases.size(), 1u) << "the expired lease was dropped when the record was written";
  EXPECT_EQ(after.nodes[0].record.leases[0].id, "next");
  EXPECT_TRUE(check_pool(records_of(after), clock).empty());
  // The crashed agent, were it to come back, has lost its lease.
  auto late = renew(crashed, *gone, 60, now);
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error(), errc::lease_lost) << diag.message;
}

TEST_F(pool_store_test, a_full_pool_is_read_again_and_a_slot_given_back_early_is_taken) {
  auto s1 = open_session();
  auto s2 = open_session();
  pool_store holder(*s1.s3, where()), waiter(*s2.s3, where());
  register_nodes(holder, 1, 1);
  // Held for an hour, but given back after the waiter has read the pool full at least once.
  auto held = acquire(holder, {"hour", "ann", 1, 3600, "a"}, settings_for(1));
  ASSERT_TRUE(held) << diag.message;
  agent_outcome waited;
  auto give_back = [&]() -> asio::awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor, 1500ms);
    co_await t.async_wait(asio::use_awaitable);
    diagnostics d;
    const pool_clock now = wall_clock_now;
    auto r = co_await release_lease(trace.root(), holder, *held, 4, now, d);
    if (!r) waited.message = "release: " + d.message;
  };
  const lease_request ask{"waiter", "bob", 1, 60, "b"};
  const auto patient = settings_for(1, 60s);
  std::vector<asio::awaitable<void>> both;
  both.push_back(lease_one(waiter, trace.root(), ask, patient, waited));
  both.push_back(give_back());
  run(net::run_all(std::move(both)));
  ASSERT_TRUE(waited.held) << waited.message;
  EXPECT_EQ(waited.held->node_id, held->node_id);
}

TEST_F(pool_store_test, a_record_that_breaks_the_rules_is_set_aside_and_the_rest_still_lease) {
  auto s = open_session();
  pool_store store(*s.s3, where());
  register_nodes(store, 1, 2);
  // Someone with write access to the bucket writes a record that leases more than the node has.
  const std::string bad = R"({"version":1,"node_id":"node-001","provider":"local"})";
  const std::string key = where().key_of("node-001");
  ASSERT_TRUE(run(s.s3->put_object(trace.root(), std::string(bucket), key, std::span<const char>(bad), diag)))
      << diag.message;
  const auto snap = read(store);
  EXPECT_EQ(snap.nodes.size(), 1u);
  EXPECT_EQ(snap.unreadable, std::vector<std::string>{"node-001"});
  auto held = acquire(store, {"l", "ann", 1, 60, "a"}, settings_for(2));
  ASSERT_TRUE(held) << diag.message;
  EXPECT_EQ(held->node_id, "node-000");

  // `ferry pool ls` shows both, the bad one as unreadable.
  auto opts = moto_->process_env();
  test::use_home(opts, dir.path());
  opts.env["FERRY_STORAGE_URL"] = fmt::format("s3://{}/ferry", bucket);
  const auto name = pool_name();
  const auto json = test::run_ferry({"pool", "ls", name, "--json"}, opts);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto v = boost::json::parse(json.out);
  ASSERT_EQ(v.at("nodes").as_array().size(), 1u);
  EXPECT_EQ(v.at("nodes").at(0).at("node"), "node-000");
  EXPECT_EQ(v.at("nodes").at(0).at("used"), 1);
  EXPECT_EQ(v.at("nodes").at(0).at("leases").at(0).at("tenant"), "ann");
  EXPECT_EQ(v.at("unreadable").at(0), "node-001");
  const auto text = test::run_ferry({"pool", "ls", name}, opts);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2 nodes, 1 of 2 slots leased"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ann (1, "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("node-001     unreadable"), std::string::npos) << text.out;
  // A name that would leave the pools' prefix is refused before any request.
  const auto escape = test::run_ferry({"pool", "ls", "../manifests"}, opts);
  EXPECT_EQ(escape.exit_code, 2);
  EXPECT_NE(escape.err.find("'../manifests' is not a pool name"), std::string::npos) << escape.err;
}

}  // namespace
}  // namespace ferry::agent::pool::store_tests
