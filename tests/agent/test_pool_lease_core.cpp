// The team pool's leases without I/O: a node's record read and written, the decisions over a snapshot
// (acquire, renew, release, register, expiry, idle nodes), the acquire state machine driven by scripted
// stores and by the sans-io harness's faults at every step, and 8 agents interleaved at random against an
// in-memory store with real ETag semantics, the pool's invariants checked after every step.
#include "agent/error.hpp"
#include "agent/pool/acquire_core.hpp"
#include "agent/pool/lease_core.hpp"
#include "agent/pool/pool_invariants.hpp"
#include "agent/pool/pool_record.hpp"
#include "agent/pool/tenant_name.hpp"
#include "support/sans_io_harness.hpp"
#include "pool_sim.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

namespace ferry::agent::pool {
namespace {

namespace json = boost::json;

constexpr pool_time t0 = 1'700'000'000;

lease a_lease(std::string id, std::string tenant, int slots, pool_time expires_at) {
  return {std::move(id), std::move(tenant), slots, "host:1:abc", expires_at};
}

pool_record a_node(std::string id, int capacity, std::vector<lease> leases = {}) {
  pool_record r;
  r.node_id = std::move(id);
  r.provider = "ec2";
  r.provider_id = "i-0123456789abcdef0";
  r.address = "10.0.0.7";
  r.ssh_port = 22;
  r.user = "ubuntu";
  r.host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBx";
  r.capacity = capacity;
  r.created_at = t0 - 3600;
  r.created_by = "alice";
  r.leases = std::move(leases);
  if (r.leases.empty()) r.idle_since = t0 - 600;
  sort_leases(r);
  return r;
}

pool_snapshot snapshot_of(std::vector<pool_record> records) {
  pool_snapshot s;
  int tag = 0;
  for (auto& r : records) s.nodes.push_back({std::move(r), fmt::format("\"etag-{}\"", ++tag)});
  return s;
}

lease_request ask(std::string tenant, int slots, std::string id = "new-lease") {
  return {std::move(id), std::move(tenant), slots, 300, "workstation:4242:f00d"};
}

const pool_limits limits{.max_nodes = 3, .max_nodes_per_tenant = 0, .node_slots = 4};

// ---- the record --------------------------------------------------------------------------------------------

TEST(pool_record, round_trips_and_serialises_the_same_bytes_whatever_the_order_of_its_leases) {
  auto r = a_node("node-000", 8, {a_lease("b", "bob", 2, t0 + 60), a_lease("a", "alice", 3, t0 + 30)});
  const auto text = serialise_record(r);
  EXPECT_EQ(text,
            R"({"version":1,"node_id":"node-000","provider":"ec2","provider_id":"i-0123456789abcdef0",)"
            R"("address":"10.0.0.7","ssh_port":22,"user":"ubuntu","host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBx",)"
            R"("capacity":8,"created_at":1699996400,"created_by":"alice","idle_since":null,"leases":[)"
            R"({"id":"a","tenant":"alice","slots":3,"holder":"host:1:abc","expires_at":1700000030},)"
            R"({"id":"b","tenant":"bob","slots":2,"holder":"host:1:abc","expires_at":1700000060}]})"
            "\n");
  diagnostics diag;
  const auto back = parse_record(text, "node-000", diag);
  ASSERT_TRUE(back) << diag.message;
  EXPECT_EQ(*back, r);
  EXPECT_EQ(serialise_record(*back), text);
  // The same record with its leases in the other order: the same bytes.
  std::swap(r.leases[0], r.leases[1]);
  EXPECT_EQ(serialise_record(r), text);
  // An idle node: idle_since as a number.
  const auto idle = a_node("node-001", 2);
  const auto idle_back = parse_record(serialise_record(idle), "node-001", diag);
  ASSERT_TRUE(idle_back) << diag.message;
  EXPECT_EQ(*idle_back, idle);
}

// The record's JSON with one field set to `value` (or removed, for a null json::value and `remove`).
std::string with_field(const std::string& path, json::value value, bool remove = false) {
  auto root = json::parse(serialise_record(
      a_node("node-000", 4, {a_lease("a", "alice", 2, t0 + 60), a_lease("b", "bob", 1, t0 + 90)})));
  json::object* o = &root.as_object();
  std::string key = path;
  if (path.starts_with("leases[")) {
    const auto index = static_cast<std::size_t>(path[7] - '0');
    o = &o->at("leases").as_array().at(index).as_object();
    key = path.substr(path.find('.') + 1);
  }
  if (remove) {
    o->erase(key);
  } else {
    (*o)[key] = std::move(value);
  }
  return json::serialize(root);
}

TEST(pool_record, a_bad_record_is_refused_with_the_node_and_the_field_named) {
  struct bad_case {
    std::string text;
    std::string says;
  };
  const std::vector<bad_case> cases = {
      {"not json", "pool node 'node-000': not JSON"},
      {"[1,2]", "pool node 'node-000': not a JSON object"},
      {with_field("version", 2), "'version' is 2, and this ferry reads version 1"},
      {with_field("capacity", 0), "'capacity' is out of range"},
      {with_field("capacity", -3), "'capacity' is out of range"},
      {with_field("capacity", "4"), "'capacity' is not a whole number"},
      {with_field("capacity", 2), "'leases' hold 3 slots of a capacity of 2"},
      {with_field("created_at", 1.5), "'created_at' is not a whole number"},
      {with_field("ssh_port", 70000), "'ssh_port' is out of range"},
      {with_field("address", nullptr, true), "'address' is missing"},
      {with_field("address", ""), "'address' is empty"},
      {with_field("user", ""), "'user' is empty"},
      {with_field("provider", "gcp"), "'provider' is 'gcp', not local, ssh or ec2"},
      {with_field("created_by", ""), "'created_by' is empty"},
      {with_field("node_id", "node-001"), "'node_id' names node 'node-001'"},
      {with_field("colour", "blue"), "'colour' is not a field of a pool record"},
      {with_field("leases", "none"), "'leases' is not a list"},
      {with_field("idle_since", t0), "'idle_since' is set while the node holds 2 leases"},
      {with_field("leases[1].slots", 0), "leases[1]: 'slots' is out of range"},
      {with_field("leases[0].slots", -1), "leases[0]: 'slots' is out of range"},
      {with_field("leases[1].tenant", ""), "leases[1]: 'tenant' is empty"},
      {with_field("leases[0].tenant", nullptr, true), "leases[0]: 'tenant' is missing"},
      {with_field("leases[1].id", "a"), "leases[1].id 'a' is held twice"},
      {with_field("leases[0].expires_at", "soon"), "leases[0]: 'expires_at' is not a whole number"},
      {with_field("leases[1].holder", 7), "leases[1]: 'holder' is not a string"},
  };
  for (const auto& c : cases) {
    diagnostics diag;
    const auto r = parse_record(c.text, "node-000", diag);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error(), make_error_code(errc::bad_pool_record)) << c.text;
    EXPECT_NE(diag.message.find(c.says), std::string::npos) << "'" << diag.message << "' lacks '" << c.says << "'";
    EXPECT_TRUE(diag.message.starts_with("pool node 'node-000'")) << diag.message;
  }
  // A node with no lease must say since when it idles; one with leases must not.
  auto idle = a_node("node-000", 4);
  idle.idle_since.reset();
  diagnostics diag;
  EXPECT_FALSE(parse_record(serialise_record(idle), "node-000", diag));
  EXPECT_NE(diag.message.find("'idle_since' is null while the node holds 0 leases"), std::string::npos)
      << diag.message;
}

TEST(pool_record, an_object_that_cannot_be_read_still_counts_in_the_snapshot) {
  pool_snapshot s;
  diagnostics diag;
  EXPECT_TRUE(add_object(s, "node-000", "\"1\"", serialise_record(a_node("node-000", 4)), diag));
  EXPECT_FALSE(add_object(s, "node-001", "\"2\"", "{}", diag));
  EXPECT_FALSE(add_object(s, "node-002", "\"3\"", serialise_record(a_node("node-000", 4)), diag));  // copied
  EXPECT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.has_name("node-001"));
  // A full pool of three: no node can be made while two of them are unreadable, and none has room.
  auto full = s;
  full.nodes[0].record = a_node("node-000", 4, {a_lease("x", "bob", 4, t0 + 50)});
  const auto d = acquire(full, t0, ask("alice", 1), limits);
  EXPECT_EQ(d.what, acquire_decision::kind::wait);
  EXPECT_EQ(d.until, t0 + 50);
}

// ---- decisions ---------------------------------------------------------------------------------------------

TEST(lease_core, acquire_packs_onto_the_fullest_busy_node_then_goes_by_node_id) {
  const auto s = snapshot_of({
      a_node("node-000", 4),                                               // idle: 4 free
      a_node("node-001", 4, {a_lease("a", "bob", 1, t0 + 100)}),           // busy: 3 free
      a_node("node-002", 4, {a_lease("b", "bob", 2, t0 + 100)}),           // busy: 2 free, the fullest that fits
      a_node("node-003", 4, {a_lease("c", "bob", 2, t0 + 100)}),           // the same, later id
      a_node("node-004", 4, {a_lease("d", "bob", 4, t0 + 100)}),           // full
  });
  const auto d = acquire(s, t0, ask("alice", 2), {.max_nodes = 9, .node_slots = 4});
  ASSERT_EQ(d.what, acquire_decision::kind::write) << d.reason;
  EXPECT_EQ(d.write->node_id, "node-002");
  EXPECT_EQ(d.write->if_match, "\"etag-3\"");
  ASSERT_EQ(d.write->record.leases.size(), 2u);
  const auto* granted = find_lease(d.write->record, "new-lease");
  ASSERT_TRUE(granted);
  EXPECT_EQ(*granted, (lease{"new-lease", "alice", 2, "workstation:4242:f00d", t0 + 300}));
  // Three slots fit only on node-001 among the busy ones; four only on the idle node.
  EXPECT_EQ(acquire(s, t0, ask("alice", 3), limits).write->node_id, "node-001");
  const auto idle = acquire(s, t0, ask("alice", 4), limits);
  EXPECT_EQ(idle.write->node_id, "node-000");
  EXPECT_FALSE(idle.write->record.idle_since);  // leased: no longer idle
  // The same snapshot in another order: the same choice.
  auto reversed = s;
  std::reverse(reversed.nodes.begin(), reversed.nodes.end());
  EXPECT_EQ(acquire(reversed, t0, ask("alice", 2), limits).write->node_id, "node-002");
}

TEST(lease_core, expired_leases_are_free_and_dropped_from_the_record_written) {
  const auto s = snapshot_of(
      {a_node("node-000", 4, {a_lease("old", "bob", 3, t0), a_lease("live", "bob", 1, t0 + 1)})});
  const auto d = acquire(s, t0, ask("alice", 3), limits);  // "old" expires at t0: free at t0
  ASSERT_EQ(d.what, acquire_decision::kind::write) << d.reason;
  EXPECT_FALSE(find_lease(d.write->record, "old"));
  EXPECT_TRUE(find_lease(d.write->record, "live"));
  EXPECT_TRUE(find_lease(d.write->record, "new-lease"));
  // A second earlier, "old" still holds its slots: no room, so a node is made.
  EXPECT_EQ(acquire(s, t0 - 1, ask("alice", 3), limits).what, acquire_decision::kind::create);
  // expire() alone: an emptied node idles from the moment its last lease expired.
  const auto cleaned = expire(s.nodes[0].record, t0 + 5);
  EXPECT_TRUE(cleaned.leases.empty());
  EXPECT_EQ(cleaned.idle_since, t0 + 1);
}

TEST(lease_core, a_full_pool_makes_a_node_under_the_lowest_free_name_until_its_maximum) {
  auto s = snapshot_of({a_node("node-001", 4, {a_lease("a", "bob", 4, t0 + 100)})});
  s.unreadable.push_back("node-000");
  const auto d = acquire(s, t0, ask("alice", 2), limits);
  ASSERT_EQ(d.what, acquire_decision::kind::create);
  EXPECT_EQ(d.node_id, "node-002");
  // Bigger than a new node: the pool cannot grow for it, and nothing there can ever hold it.
  const auto big = acquire(s, t0, ask("alice", 5), limits);
  EXPECT_EQ(big.what, acquire_decision::kind::refuse);
  EXPECT_EQ(big.error, make_error_code(errc::pool_cannot_fit));
  EXPECT_EQ(acquire(s, t0, ask("", 1), limits).error, make_error_code(errc::bad_lease_request));
  EXPECT_EQ(acquire(s, t0, ask("alice", 0), limits).error, make_error_code(errc::bad_lease_request));
  EXPECT_EQ(acquire(s, t0, ask("alice", 1, "a"), limits).error, make_error_code(errc::bad_lease_request));
}

TEST(lease_core, a_full_pool_at_its_maximum_waits_until_the_first_node_would_have_room) {
  const auto s = snapshot_of({
      a_node("node-000", 4, {a_lease("a", "bob", 1, t0 + 10), a_lease("b", "bob", 3, t0 + 80)}),
      a_node("node-001", 4, {a_lease("c", "bob", 2, t0 + 40), a_lease("d", "bob", 2, t0 + 50)}),
      a_node("node-002", 4, {a_lease("e", "bob", 4, t0 + 70)}),
  });
  // One slot: node-000's first lease expires first.
  const auto one = acquire(s, t0, ask("alice", 1), limits);
  ASSERT_EQ(one.what, acquire_decision::kind::wait);
  EXPECT_EQ(one.until, t0 + 10);
  // Three slots: node-000 has them at +80, node-001 at +50, node-002 at +70.
  const auto three = acquire(s, t0, ask("alice", 3), limits);
  ASSERT_EQ(three.what, acquire_decision::kind::wait);
  EXPECT_EQ(three.until, t0 + 50);
  EXPECT_NE(three.reason.find("no 3 slots free"), std::string::npos) << three.reason;
  // At that time they are there.
  EXPECT_EQ(acquire(s, three.until, ask("alice", 3), limits).write->node_id, "node-001");
}

TEST(lease_core, a_request_never_goes_to_a_node_its_job_holds_and_grows_or_waits_instead) {
  const auto s = snapshot_of({
      a_node("node-000", 4, {a_lease("a", "alice", 1, t0 + 100)}),  // the job's own: 3 free
      a_node("node-001", 4, {a_lease("b", "bob", 4, t0 + 60)}),     // full until +60
  });
  auto request = ask("alice", 1);
  EXPECT_EQ(acquire(s, t0, request, limits).write->node_id, "node-000");
  request.avoid = {"node-000"};
  const auto grown = acquire(s, t0, request, limits);
  ASSERT_EQ(grown.what, acquire_decision::kind::create) << grown.reason;
  EXPECT_EQ(grown.node_id, "node-002");
  // At the maximum it waits for the node it does not hold, never for its own.
  const auto waits = acquire(s, t0, request, {.max_nodes = 2, .node_slots = 4});
  ASSERT_EQ(waits.what, acquire_decision::kind::wait) << waits.reason;
  EXPECT_EQ(waits.until, t0 + 60);
  // Holding every node of a full-sized pool, it can never get another.
  request.avoid = {"node-000", "node-001"};
  const auto never = acquire(s, t0, request, {.max_nodes = 2, .node_slots = 4});
  EXPECT_EQ(never.error, make_error_code(errc::pool_cannot_fit));
  EXPECT_NE(never.reason.find("beside the 2 the job holds already"), std::string::npos) << never.reason;
}

TEST(tenant_name, a_tenant_becomes_a_portable_unix_name) {
  EXPECT_EQ(tenant_unix_name("alice"), "alice");
  EXPECT_EQ(tenant_unix_name("Alice.Smith@Laptop-3"), "alice_smith-laptop-3");
  EXPECT_EQ(tenant_unix_name("3d-team"), "_3d-team");
  EXPECT_EQ(tenant_unix_name("-x"), "_-x");
  EXPECT_EQ(tenant_unix_name("r\u00e9my ; rm -rf /"), "rmyrm-rf");  // what is not ASCII goes too
  EXPECT_EQ(tenant_unix_name("!!!"), "");
  EXPECT_EQ(tenant_unix_name(std::string(40, 'a')), std::string(32, 'a'));
  EXPECT_EQ(tenant_of("", "bob", "ws.example.org"), "bob-ws_example_org");
  EXPECT_EQ(tenant_of("Team-A", "bob", "ws"), "team-a");
}

TEST(lease_core, a_tenant_at_its_cap_only_packs_onto_nodes_it_holds_and_else_waits) {
  const auto s = snapshot_of({
      a_node("node-000", 4, {a_lease("a", "alice", 1, t0 + 90)}),
      a_node("node-001", 4, {a_lease("b", "alice", 1, t0 + 30), a_lease("c", "alice", 2, t0 + 60)}),
      a_node("node-002", 4),
  });
  const pool_limits capped{.max_nodes = 5, .max_nodes_per_tenant = 2, .node_slots = 4};
  // Alice holds two nodes: one more slot goes onto one of them (node-001, the fuller).
  EXPECT_EQ(acquire(s, t0, ask("alice", 1), capped).write->node_id, "node-001");
  // Four slots fit only on the idle node, which would be her third, and she may not grow the pool either.
  const auto w = acquire(s, t0, ask("alice", 4), capped);
  ASSERT_EQ(w.what, acquire_decision::kind::wait) << w.reason;
  EXPECT_EQ(w.until, t0 + 60);  // her leases on node-001 are all gone then
  EXPECT_NE(w.reason.find("tenant 'alice' holds leases on 2 nodes"), std::string::npos) << w.reason;
  // Bob, holding nothing, takes the idle node; with its lease expired, the cap counts Alice's node no more.
  EXPECT_EQ(acquire(s, t0, ask("bob", 4), capped).write->node_id, "node-002");
  EXPECT_EQ(acquire(s, t0 + 60, ask("alice", 4), capped).write->node_id, "node-001");
}

TEST(lease_core, release_drops_the_lease_and_the_last_one_sets_idle_since) {
  const auto s = snapshot_of(
      {a_node("node-000", 4, {a_lease("a", "alice", 1, t0 + 90), a_lease("b", "bob", 2, t0 + 90)})});
  const auto first = release(s.nodes[0], "a", t0 + 5);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->if_match, "\"etag-1\"");
  EXPECT_FALSE(find_lease(first->record, "a"));
  EXPECT_FALSE(first->record.idle_since);
  const auto last = release({first->record, "\"etag-2\""}, "b", t0 + 7);
  ASSERT_TRUE(last);
  EXPECT_TRUE(last->record.leases.empty());
  EXPECT_EQ(last->record.idle_since, t0 + 7);
  diagnostics diag;
  EXPECT_TRUE(parse_record(last->body(), "node-000", diag)) << diag.message;
  // A lease that is not there: nothing to write.
  EXPECT_FALSE(release(s.nodes[0], "gone", t0));
  // The last live lease released while an expired one lingers: idle from the release, not the expiry.
  const auto lingering = snapshot_of(
      {a_node("node-000", 4, {a_lease("old", "bob", 1, t0 - 50), a_lease("a", "alice", 1, t0 + 90)})});
  EXPECT_EQ(release(lingering.nodes[0], "a", t0)->record.idle_since, t0);
}

TEST(lease_core, renew_extends_a_live_lease_and_refuses_an_expired_one) {
  const auto s = snapshot_of(
      {a_node("node-000", 4, {a_lease("a", "alice", 1, t0 + 20), a_lease("old", "bob", 1, t0 - 1)})});
  diagnostics diag;
  const auto w = renew(s.nodes[0], "a", t0, 300, diag);
  ASSERT_TRUE(w) << diag.message;
  EXPECT_EQ(find_lease(w->record, "a")->expires_at, t0 + 300);
  EXPECT_FALSE(find_lease(w->record, "old"));  // cleaned on the way
  const auto lost = renew(s.nodes[0], "old", t0, 300, diag);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error(), make_error_code(errc::lease_lost));
  EXPECT_NE(diag.message.find("expired at"), std::string::npos) << diag.message;
  EXPECT_EQ(renew(s.nodes[0], "nope", t0, 300, diag).error(), make_error_code(errc::lease_lost));
  // Never shortened.
  EXPECT_EQ(find_lease(renew(s.nodes[0], "a", t0, 5, diag)->record, "a")->expires_at, t0 + 20);
}

TEST(lease_core, register_writes_the_new_nodes_first_record_with_the_creators_lease) {
  diagnostics diag;
  const new_node n{"ec2", "i-0abc", "10.0.0.9", 22, "ubuntu", "ssh-ed25519 AAAA", 4};
  const auto w = register_node("node-002", n, t0, ask("alice", 3), diag);
  ASSERT_TRUE(w) << diag.message;
  EXPECT_FALSE(w->if_match);  // If-None-Match: *
  EXPECT_EQ(w->record.created_by, "alice");
  EXPECT_EQ(w->record.created_at, t0);
  EXPECT_EQ(w->record.leases, (std::vector<lease>{{"new-lease", "alice", 3, "workstation:4242:f00d", t0 + 300}}));
  EXPECT_TRUE(parse_record(w->body(), "node-002", diag)) << diag.message;
  EXPECT_EQ(register_node("node-002", n, t0, ask("alice", 5), diag).error(), make_error_code(errc::bad_lease_request));
}

TEST(lease_core, idle_nodes_lists_the_longest_idle_beyond_the_minimum) {
  const auto s = snapshot_of({
      a_node("node-000", 4),                                          // idle since t0 - 600
      a_node("node-001", 4, {a_lease("a", "bob", 1, t0 - 1000)}),    // idle since its lease expired
      a_node("node-002", 4, {a_lease("b", "bob", 1, t0 + 10)}),      // busy
      a_node("node-003", 4, {a_lease("c", "bob", 1, t0 - 100)}),     // idle, but not for long
  });
  EXPECT_EQ(idle_nodes(s, t0, 300, 0), (std::vector<std::string>{"node-001", "node-000"}));
  EXPECT_EQ(idle_nodes(s, t0, 300, 3), (std::vector<std::string>{"node-001"}));
  EXPECT_EQ(idle_nodes(s, t0, 300, 4), (std::vector<std::string>{}));
  EXPECT_EQ(idle_nodes(s, t0, 50, 1), (std::vector<std::string>{"node-001", "node-000", "node-003"}));
}

TEST(pool_invariants, finds_a_slot_leased_twice_a_lease_id_held_twice_and_a_lease_without_tenant) {
  EXPECT_EQ(check_pool({a_node("n0", 4, {a_lease("a", "x", 4, t0 + 9)}), a_node("n1", 2)}, t0),
            std::vector<std::string>{});
  auto over = a_node("n0", 4, {a_lease("a", "x", 3, t0 + 9), a_lease("b", "y", 2, t0 + 9)});
  auto twice = a_node("n1", 4, {a_lease("a", "z", 1, t0 + 9)});
  auto nobody = a_node("n2", 4, {a_lease("c", "", 1, t0 + 9)});
  const auto found = check_pool({over, twice, nobody}, t0);
  EXPECT_EQ(found, (std::vector<std::string>{
                       "node 'n0': unexpired leases hold 5 slots of its 4 at 1700000000",
                       "lease id 'a' is held on node 'n0' and again on node 'n1'",
                       "node 'n2': lease 'c' has no tenant",
                   }));
  // Expired leases hold nothing.
  EXPECT_EQ(check_pool({over}, t0 + 9), std::vector<std::string>{});
}

// ---- the acquire state machine -----------------------------------------------------------------------------

// A store that fails every write once with a conflict, then lets the same write land: each step of an
// acquire meets another agent's write, and the core must read again each time and get there.
class conflicting_store {
 public:
  explicit conflicting_store(pool_snapshot s) : pool_(std::move(s)) {}

  // Drives `core` to its finish; returns the actions taken, by name.
  std::vector<std::string> drive(acquire_core& core) {
    std::vector<std::string> log;
    for (int step = 0; step < 100 && !core.done(); ++step) {
      const auto a = core.next();
      switch (a.what) {
        case acquire_action::kind::read_pool:
          log.push_back("read");
          core.pool_read(pool_, now_);
          break;
        case acquire_action::kind::write_record: {
          const auto key = fmt::format("{} {}", a.write->node_id, a.write->if_match.value_or("*"));
          const bool first = tried_.insert(key).second;
          log.push_back(fmt::format("write {}{}", key, first ? " conflict" : ""));
          if (first) {
            core.write_conflict();
          } else {
            core.written("\"landed\"");
          }
          break;
        }
        case acquire_action::kind::create_node:
          log.push_back("create " + a.node_id);
          core.node_made({"local", "local-7", "10.200.0.7", 22, "root", "ssh-ed25519 AAAA", 4}, now_);
          break;
        case acquire_action::kind::wait_until:
          log.push_back(fmt::format("wait {}", a.until - t0));
          core.waited();
          break;
        case acquire_action::kind::finish: break;
      }
      now_ += 10;  // each step takes 10 s
    }
    return log;
  }

 private:
  pool_snapshot pool_;
  pool_time now_ = t0;
  std::set<std::string> tried_;
};

TEST(acquire_core, a_conflict_at_every_write_reads_again_and_gets_the_lease) {
  // A node with room.
  {
    conflicting_store store(snapshot_of({a_node("node-000", 4, {a_lease("a", "bob", 1, t0 + 60)})}));
    acquire_core core(ask("alice", 2), limits, 2);
    EXPECT_EQ(store.drive(core), (std::vector<std::string>{"read", "write node-000 \"etag-1\" conflict", "read",
                                                           "write node-000 \"etag-1\""}));
    ASSERT_TRUE(core.done());
    ASSERT_TRUE(core.held()) << core.failure_diagnostics().message;
    EXPECT_EQ(core.held()->node_id, "node-000");
    EXPECT_EQ(core.held()->etag, "\"landed\"");
    EXPECT_EQ(core.held()->granted.slots, 2);
    EXPECT_EQ(core.conflicts(), 1);
    EXPECT_FALSE(core.made_node());
  }
  // An empty pool: a node is made, and its first record meets a conflict too.
  {
    conflicting_store store(pool_snapshot{});
    acquire_core core(ask("alice", 2), limits, 2);
    EXPECT_EQ(store.drive(core), (std::vector<std::string>{"read", "create node-000", "write node-000 * conflict",
                                                           "read", "write node-000 *"}));
    ASSERT_TRUE(core.held()) << core.failure_diagnostics().message;
    EXPECT_EQ(core.held()->record.address, "10.200.0.7");
    // Made at +10; the lease counts from the read its write was decided on (+30).
    EXPECT_EQ(core.held()->record.created_at, t0 + 10);
    EXPECT_EQ(core.held()->granted.expires_at, t0 + 330);
    EXPECT_FALSE(core.made_node());  // it joined
  }
}

TEST(acquire_core, a_write_that_landed_though_its_answer_was_lost_ends_with_its_lease) {
  // The PUT lands, its answer is lost, the retry fails its own If-Match: a conflict as far as the shell
  // knows. The next read finds the lease in the pool, and the acquire ends with it instead of asking again.
  const auto before = snapshot_of({a_node("node-000", 4, {a_lease("a", "bob", 1, t0 + 60)})});
  acquire_core core(ask("alice", 2), limits, 3);
  core.pool_read(before, t0);
  const auto w = core.next();
  ASSERT_EQ(w.what, acquire_action::kind::write_record);
  pool_snapshot landed;
  landed.nodes.push_back({w.write->record, "\"landed\""});
  core.write_conflict();
  ASSERT_EQ(core.next().what, acquire_action::kind::read_pool);
  core.pool_read(landed, t0 + 1);
  ASSERT_TRUE(core.done());
  ASSERT_TRUE(core.held()) << core.failure_diagnostics().message;
  EXPECT_EQ(core.held()->node_id, "node-000");
  EXPECT_EQ(core.held()->etag, "\"landed\"");
  EXPECT_EQ(core.held()->granted.id, "new-lease");
  EXPECT_EQ(core.held()->record.leases.size(), 2u);
}

TEST(acquire_core, too_many_conflicts_in_a_row_fail_with_a_clear_reason) {
  // A store where every write conflicts: another agent always writes first.
  acquire_core core(ask("alice", 1), limits, 3);
  const auto pool = snapshot_of({a_node("node-000", 4)});
  int reads = 0;
  while (!core.done()) {
    if (core.next().what == acquire_action::kind::read_pool) {
      ++reads;
      core.pool_read(pool, t0);
    } else {
      core.write_conflict();
    }
  }
  EXPECT_EQ(reads, 3);
  EXPECT_EQ(core.conflicts(), 3);
  EXPECT_EQ(core.failure(), make_error_code(errc::pool_contended));
  EXPECT_EQ(core.failure_diagnostics().message,
            "3 writes in a row to the pool's records lost to other agents' writes; giving up");
  EXPECT_FALSE(core.write_unsure());  // a conflict is a write that did not land
}

TEST(acquire_core, a_node_made_whose_name_was_taken_joins_under_the_next_name_or_is_handed_back) {
  // Two nodes of three, full: make node-002; someone else registers node-002 first.
  const auto two = snapshot_of({a_node("node-000", 4, {a_lease("a", "bob", 4, t0 + 60)}),
                                a_node("node-001", 4, {a_lease("b", "bob", 4, t0 + 60)})});
  auto three = two;
  three.nodes.push_back({a_node("node-002", 4, {a_lease("c", "carol", 4, t0 + 60)}), "\"x\""});
  acquire_core core(ask("alice", 1), limits, 5);
  core.pool_read(two, t0);
  ASSERT_EQ(core.next().what, acquire_action::kind::create_node);
  EXPECT_EQ(core.next().node_id, "node-002");
  core.node_made({"ec2", "i-mine", "10.0.0.9", 22, "ubuntu", "k", 4}, t0 + 40);
  ASSERT_EQ(core.next().what, acquire_action::kind::write_record);
  core.write_conflict();
  // The pool is full now: the node made cannot join, and the acquire goes on among the nodes there are.
  core.pool_read(three, t0 + 41);
  ASSERT_EQ(core.next().what, acquire_action::kind::wait_until);
  EXPECT_EQ(core.next().until, t0 + 60);
  core.waited();
  // One node went meanwhile (the autoscaler): the node made joins under its name.
  core.pool_read(snapshot_of({three.nodes[1].record, three.nodes[2].record}), t0 + 61);
  ASSERT_EQ(core.next().what, acquire_action::kind::write_record);
  EXPECT_EQ(core.next().write->node_id, "node-000");
  EXPECT_EQ(core.next().write->record.provider_id, "i-mine");
  core.written("\"n\"");
  EXPECT_FALSE(core.made_node());
  // The same, but a lease elsewhere comes first: the lease is held, and the node made is the shell's to end.
  acquire_core other(ask("alice", 1), limits, 5);
  other.pool_read(two, t0);
  other.node_made({"ec2", "i-mine", "10.0.0.9", 22, "ubuntu", "k", 4}, t0 + 40);
  other.write_conflict();
  auto roomy = three;
  roomy.nodes[0].record.leases[0].slots = 2;
  other.pool_read(roomy, t0 + 41);
  ASSERT_EQ(other.next().what, acquire_action::kind::write_record);
  EXPECT_EQ(other.next().write->node_id, "node-000");
  other.written("\"m\"");
  ASSERT_TRUE(other.held());
  ASSERT_TRUE(other.made_node());
  EXPECT_EQ(other.made_node()->provider_id, "i-mine");
}

// Plays the shell for the sans-io harness, against a scripted pool: the happy path reads, writes (or makes
// a node and writes its record), and holds. The harness's error is a transport error of the step (a read,
// a write, the provider), which ends the acquire; a cancellation ends it at once, whatever runs.
class acquire_sim {
 public:
  using core_type = acquire_core;
  static constexpr bool ends_on_error = true;

  explicit acquire_sim(pool_snapshot pool) : core_(ask("alice", 2), limits, 3), pool_(std::move(pool)) {}

  acquire_core& core() { return core_; }
  const acquire_core& core() const { return core_; }
  static bool is_finish(const acquire_action& a) { return a.what == acquire_action::kind::finish; }
  void started(const acquire_action& a) {
    if (a.what == acquire_action::kind::write_record && !a.write) problems_.push_back("a write without a record");
  }
  bool advance(int step, bool fail) {
    const auto a = core_.next();
    diagnostics diag;
    diag.set(fmt::format("step {} failed", step));
    writing_ = a.what == acquire_action::kind::write_record;
    switch (a.what) {
      case acquire_action::kind::read_pool:
        if (fail) return core_.read_failed(error_at(step), diag), true;
        core_.pool_read(pool_, t0);
        return true;
      case acquire_action::kind::write_record:
        if (fail) return core_.write_failed(error_at(step), diag), true;
        core_.written("\"w\"");
        return true;
      case acquire_action::kind::create_node:
        if (fail) return core_.node_failed(error_at(step), diag), true;
        core_.node_made({"local", "l-1", "10.200.0.9", 22, "root", "k", 4}, t0 + 1);
        return true;
      case acquire_action::kind::wait_until: core_.waited(); return true;
      case acquire_action::kind::finish: break;
    }
    return false;
  }
  void cancel(net::cancel_kind k) {
    cancelled_in_write_ = !core_.done() && core_.next().what == acquire_action::kind::write_record;
    core_.cancelled(k);
  }
  error_code error_at(int step) const { return test::sans_io::error_at(step); }
  bool settled() const { return core_.done(); }
  bool success_wins() const { return false; }
  error_code outcome_error() const {
    // The harness speaks Asio's operation_aborted; the core spells it without Asio: the same code.
    if (core_.failure() == acquire_core::cancellation_error()) return boost::asio::error::operation_aborted;
    return core_.failure();
  }
  bool cleanup_owed() const { return false; }
  bool cleaned_up() const { return false; }
  const std::vector<std::string>& problems() const { return problems_; }
  // The last step was a write, and it failed or was cancelled.
  bool write_cut() const { return (writing_ && core_.failure() && !core_.held()) || cancelled_in_write_; }

 private:
  acquire_core core_;
  pool_snapshot pool_;
  bool writing_ = false;
  bool cancelled_in_write_ = false;
  std::vector<std::string> problems_;
};

TEST(acquire_core, a_transport_error_or_a_cancellation_at_any_step_ends_the_acquire_unsure_of_a_cut_write) {
  EXPECT_EQ(acquire_core::cancellation_error(), make_error_code(boost::asio::error::operation_aborted));
  const std::vector<pool_snapshot> pools = {snapshot_of({a_node("node-000", 4)}), pool_snapshot{}};
  int runs = 0;
  for (const auto& pool : pools) {
    acquire_sim clean(pool);
    test::sans_io::run<acquire_sim> happy(clean, {});
    happy.play();
    EXPECT_EQ(happy.problems(), std::vector<std::string>{});
    ASSERT_TRUE(clean.core().held());
    const auto report = test::sans_io::every_fault(
        [&] { return acquire_sim(pool); }, {},
        [&](const acquire_sim& d, const test::sans_io::fault_plan& plan) {
          // A write cut short may have landed: the core says so, and never claims the lease.
          EXPECT_EQ(d.core().write_unsure(), d.write_cut()) << plan.describe();
          if (d.core().failure()) {
            EXPECT_FALSE(d.core().held()) << plan.describe();
          }
        });
    runs += report.runs;
    for (const auto& f : report.failures) ADD_FAILURE() << f;
  }
  EXPECT_GT(runs, 20);
}

// ---- many agents at once -------------------------------------------------------------------------------------

struct interleaving_result {
  std::vector<std::string> problems;
  int leased = 0, waited = 0, conflicts = 0, steps = 0;
};

// 8 agents against one store, each step one agent's next operation picked by the seeded PRNG, the clock
// moving on by 0-2 s a step; the pool's invariants are checked after every step.
interleaving_result interleave(unsigned seed, int rounds) {
  using test::pool_sim::agent;
  std::mt19937 rng(seed);
  test::pool_sim::memory_store store;
  const pool_limits sim_limits{.max_nodes = 3, .max_nodes_per_tenant = 2, .node_slots = 4};
  std::vector<agent> agents;
  for (int i = 0; i < 8; ++i) {
    agents.emplace_back(i, sim_limits, 1 + i % 3, 60, 1000);
    agents.back().rounds = rounds;
  }
  interleaving_result out;
  pool_time now = t0;
  for (; out.steps < 100000; ++out.steps) {
    std::vector<agent*> running;
    for (auto& a : agents)
      if (!a.finished()) running.push_back(&a);
    if (running.empty()) break;
    running[rng() % running.size()]->step(store, now, rng());
    now += rng() % 3;
    for (const auto& v : check_pool(store.records(), now))
      out.problems.push_back(fmt::format("seed {} step {}: {}", seed, out.steps, v));
    if (store.size() > static_cast<std::size_t>(sim_limits.max_nodes))
      out.problems.push_back(fmt::format("seed {} step {}: {} nodes", seed, out.steps, store.size()));
    for (const auto& m : store.missing_leases(test::pool_sim::holders(agents), now))
      out.problems.push_back(fmt::format("seed {} step {}: {}", seed, out.steps, m));
    if (store.unreadable() != 0)
      out.problems.push_back(fmt::format("seed {} step {}: a record written does not parse", seed, out.steps));
    if (!out.problems.empty()) return out;
  }
  for (const auto& a : agents) {
    if (!a.finished()) out.problems.push_back(fmt::format("seed {}: an agent never finished", seed));
    for (const auto& f : a.failures()) out.problems.push_back(fmt::format("seed {}: {}", seed, f));
    for (const auto e : a.outcomes()) {
      out.leased += e == agent::ended::leased;
      out.waited += e == agent::ended::waited;
    }
    out.conflicts += a.conflicts();
  }
  return out;
}

TEST(pool_simulation, eight_agents_in_any_interleaving_never_lease_a_slot_twice_and_each_gets_a_lease_or_a_wait) {
  int leased = 0, waited = 0, conflicts = 0;
  for (unsigned seed = 1; seed <= 300; ++seed) {
    const auto r = interleave(seed, 3);
    for (const auto& p : r.problems) ADD_FAILURE() << p;
    if (!r.problems.empty()) break;
    EXPECT_EQ(r.leased + r.waited, 8 * 3) << "seed " << seed;
    leased += r.leased;
    waited += r.waited;
    conflicts += r.conflicts;
  }
  // The runs met every path: leases, full pools, and writes that lost to others'.
  EXPECT_GT(leased, 1000);
  EXPECT_GT(waited, 100);
  EXPECT_GT(conflicts, 100);
  std::printf("300 seeds: %d leases, %d waits, %d conflicts\n", leased, waited, conflicts);
}

}  // namespace
}  // namespace ferry::agent::pool
