#pragma once
// What a pool policy would have done with a recorded workload: a deterministic replay without I/O or clock.
// Jobs arrive at recorded times, each holding some slots for a recorded duration. The simulated pool is
// what the lease protocol does, reduced to its effect:
//   - `min_nodes` nodes are up and ready from the start (`ferry pool up` made them beforehand);
//   - a job starts as soon as enough slots are free on ready nodes, taking them from the busiest nodes
//     first (as acquire packs), and within the tenant's cap; waiting jobs are served in arrival order, but
//     one that fits goes before an earlier one that does not (each agent leases for itself, nobody queues);
//   - slots that waiting jobs need and no node up or booting will free make new nodes, up to `max_nodes`,
//     each ready `boot` seconds after it was asked for;
//   - a node beyond the minimum that stays idle for `idle_timeout` stops itself;
//   - a job that found no room and no node to make for it reads the pool again every `poll` seconds from
//     its arrival, so a slot freed between two reads waits for the next, and goes to whichever job reads
//     first: one that arrives then, or one of the waiting whose read comes sooner. A node that finishes
//     booting goes to the jobs that asked for it, in arrival order, at once (the acquire that made it).
// Node-seconds count each node from its creation (boot included) until it stops; nodes still up when the
// work ends count until they would stop (the minimum: until the work ends).
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ferry::agent::pool {

struct sim_job {
  double arrival = 0;  // seconds from the workload's start
  std::string tenant;
  int slots = 1;        // held at once, for the whole duration
  double duration = 0;  // seconds it holds them
};

struct pool_policy {
  int min_nodes = 0;
  int max_nodes = 1;
  int max_nodes_per_tenant = 0;  // a tenant holds at most this many nodes' worth of slots; 0: no cap
  double idle_timeout = 0;       // seconds; 0: a node beyond the minimum stops as soon as it is idle
  double boot = 0;               // seconds from asking for a node until it is ready
  double poll = 0;               // seconds between a waiting job's reads of the pool; 0: it sees a slot at once
  int capacity = 1;              // slots per node
};

struct sim_waits {
  std::size_t jobs = 0;
  double p50 = 0, p95 = 0, max = 0;  // seconds from arrival to start (nearest rank)
  double mean = 0;
};

struct sim_result {
  std::vector<double> starts;  // per job, in the order given
  sim_waits waits;
  std::map<std::string, sim_waits> tenants;
  double node_seconds = 0;       // what the pool cost
  double idle_node_seconds = 0;  // of it, ready nodes that held no lease
  double busy_slot_seconds = 0;  // what the jobs used
  double utilisation = 0;        // busy slot-seconds over node-seconds times capacity
  double end = 0;                // when the last job ended
  // Nodes up (booting included) over time: (time, count) at each change, starting with (0, min_nodes).
  std::vector<std::pair<double, int>> nodes;
  std::size_t unplaceable = 0;  // jobs that need more slots than the pool can ever give (never started)
};

// Throws std::invalid_argument for a policy that cannot run (max_nodes < 1 or < min_nodes, capacity < 1,
// negative times) or a job with slots < 1 or a negative arrival or duration.
sim_result simulate(const std::vector<sim_job>& jobs, const pool_policy& policy);

}  // namespace ferry::agent::pool
