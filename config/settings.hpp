#pragma once
// The configuration model: every setting ferry reads, typed, with every timeout, retry count and
// concurrency limit of the project in one place. The defaults live in config/schema.cpp with each key.
#include "config/units.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ferry::config {

struct storage_settings {
  std::string url;            // s3://BUCKET/PREFIX where layers and manifests live
  std::string endpoint;       // overrides the endpoint found the AWS way
  std::string node_endpoint;  // the endpoint as nodes see it, for presigned URLs (defaults to endpoint)
  std::string region;         // overrides the region found the AWS way
  std::string addressing;     // auto, path or virtual
  std::string ca_bundle;      // PEM file of extra trusted CAs
};

struct retry_settings {
  int max_attempts = 0;
  duration base_delay{};
  duration max_delay{};
};

struct net_settings {
  duration connect_timeout{};
  duration read_timeout{};
  duration write_timeout{};
  duration pool_idle_timeout{};
  int max_connections_per_host = 0;
  retry_settings retry;
  // Storage that makes no progress (net/stall_watch.hpp): a warning after stall_warning, the command's end
  // after stall_limit; 0: never. An abort of a multipart upload has one attempt within abort_timeout.
  duration stall_warning{};
  duration stall_limit{};
  duration abort_timeout{};
};

struct s3_settings {
  byte_size multipart_threshold;
  byte_size part_size;
  int parts_in_flight = 0;
  int max_concurrency = 0;
  duration presign_expiry{};
};

struct packaging_settings {
  std::string python;
  bool ship_site_packages = true;
  std::vector<std::string> excludes;
  int compression_level = 0;   // deflate's
  std::string codec;            // zstd or deflate
  int zstd_level = 0;
  byte_size shard_size;
  byte_size max_layer_size;
  byte_size large_file_warning;
  std::string external_symlinks;  // follow or refuse
  int hash_threads = 0;           // 0: one per core
  duration discover_timeout{};
  duration stale_upload_age{};  // a pack aborts its prefix's multipart uploads older than this; 0: never
  duration manifest_refresh{};  // a pack stores again a found manifest older than this, so gc sees it used
};

// The most nodes one command asks for: nodes.count, nodes.max_nodes and every --nodes flag.
inline constexpr int max_node_count = 1000;

struct nodes_settings {
  std::string provider;
  int count = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  duration idle_timeout{};       // a node idle this long stops itself (its watchdog); 0: never
  duration watchdog_interval{};  // between a node watchdog's checks; at most idle_timeout
  duration ready_timeout{};
  duration poll_initial{};
  duration poll_max{};
  duration boot_delay{};
  byte_size cache_size;
  // Fan-out (agent/materialise/fanout_plan.hpp): a job of more than fanout_min nodes hands its layers on between its
  // nodes; storage feeds fanout_seeds of them, each node feeds up to fanout_degree others, and a node waits
  // up to fanout_wait for a shard its parent has not got yet. fanout false: never.
  bool fanout = true;
  int fanout_min = 0;
  int fanout_seeds = 0;
  int fanout_degree = 0;
  duration fanout_wait{};
  duration fanout_hold{};  // how long a child holds its layers back for a parent's server to listen
  // What a new node takes to be ready for work, until a job has measured one of its own: a map grows past
  // nodes.count only when its tasks would wait longer than this (agent/map/map_growth.hpp).
  duration start_estimate{};

  // ---- the local and ssh providers, and the node registry ----
  // One existing machine the ssh provider hands out (nodes.ssh_hosts). Empty user and identity_file
  // fall back to ssh.user and ssh.identity_file.
  struct ssh_host {
    std::string name;  // alias for humans and the node id; empty: host, or host:port when not 22
    std::string host;
    int port = 22;
    std::string user;
    std::string identity_file;
    friend bool operator==(const ssh_host&, const ssh_host&) = default;
  };
  std::vector<ssh_host> ssh_hosts;
  std::string local_network;          // auto (netns when root, else loopback), netns or loopback
  std::string local_sshd;             // the sshd binary local nodes run
  duration local_command_timeout{};   // deadline of each helper (ip, ssh-keygen) and of a node's teardown
  duration registry_lock_timeout{};   // how long to wait for another ferry command's lock on the state files
};

struct ssh_settings {
  std::string user;
  std::string identity_file;
  std::string kex;
  duration connect_timeout{};
  duration keepalive_interval{};
  duration alive_timeout{};  // silence from the peer, keepalives unanswered, for this long: it is gone
  duration idle_timeout{};   // a session with no command running this long is closed
  duration kill_grace{};     // between TERM and KILL for a cancelled remote command
  int max_sessions = 0;
};

struct agent_settings {
  int concurrency = 0;  // tasks per node in `ferry map`
  int retries = 0;      // attempts per task beyond the first
  byte_size task_output_limit;  // stdout and stderr kept per map task
  duration shutdown_grace{};
  // Materialising layers on a node (agent/materialise/materialise.hpp).
  duration download_timeout{};    // a layer download on a node that receives nothing this long fails
  int download_parallelism = 0;   // layer shards one node downloads at once
  byte_size download_range;       // a shard larger than this is fetched in ranged GETs of this size
  byte_size max_shard_content;    // cap on what one shard may expand to on a node, whatever its manifest says
  std::string node_program;       // the ferry-node binary sent to nodes; empty: the one beside ferry
  duration cache_lock_timeout{};  // how long a node waits for another run's lock on its layer cache
  int stage_parallelism = 0;      // objects one node downloads at once for --stage
  // `run` and `map` of a Python command start it once the workspace is on the node, and an import hook
  // holds each import until its layer has landed (agent/node/import_gate.hpp).
  bool lazy_start = true;
  // `ferry cluster` (agent/cluster/): how long the scheduler and every worker have to start and register
  // once their nodes are ready.
  duration cluster_start_timeout{};
};

// The ec2 node provider. A node_spec's unset fields (0, false, no type) fall back to these.
struct ec2_settings {
  std::string region;                           // overrides the region found the AWS way
  std::string endpoint;                         // overrides the endpoint found the AWS way
  std::string ami;                              // the image nodes boot; required to create nodes
  std::string subnet_id;                        // empty: the default VPC's default subnet
  std::vector<std::string> security_group_ids;  // empty: the VPC's default group
  std::string instance_type;                    // empty: the cheapest type meeting the minimums
  bool spot = false;
  int min_cpus = 0;
  double min_memory_gib = 0;
  std::string architecture;                     // x86_64 or arm64: what the AMI runs on
  std::string address;                          // private or public: the address ferry connects to
  duration catalogue_ttl{};                     // how long the cached type and price catalogue is used
  std::string user;                             // login user; the loader fills in ssh.user when empty
};

// A team's shared pool of nodes (agent/pool/, docs/pool.md). With a name set, run, map and cluster lease
// slots of the pool's nodes, and these limits take the place of nodes.min_nodes, nodes.max_nodes and
// nodes.idle_timeout.
struct pool_settings {
  std::string name;            // empty: no pool, private nodes as before
  std::string tenant;          // who the slots are counted against; empty: $USER@host
  int min_nodes = 0;           // nodes the pool keeps however idle
  int max_nodes = 0;           // nodes in the pool at most
  int max_nodes_per_tenant = 0;  // nodes one tenant holds leases on at once; 0: no cap
  int node_slots = 0;          // slots of a node the pool makes
  duration idle_timeout{};     // a node beyond min_nodes idle this long stops itself
  duration lease_ttl{};        // a lease not renewed this long is free again; renewed every third of it
  duration max_wait{};         // how long a job waits for a slot in a full pool
  duration poll{};             // a full pool is read again at least this often
  int max_conflicts = 0;       // lost conditional writes in a row before a lease request gives up
};

// XDG base directories for ferry's own state, resolved from the environment.
struct paths {
  std::filesystem::path cache;   // hash cache, layer cache
  std::filesystem::path state;   // node registry, traces
  std::filesystem::path config;  // config.toml, ssh key, known_hosts
};

struct settings {
  storage_settings storage;
  net_settings net;
  s3_settings s3;
  packaging_settings packaging;
  nodes_settings nodes;
  ssh_settings ssh;
  agent_settings agent;
  ec2_settings ec2;
  pool_settings pool;
  paths dirs;
};

}  // namespace ferry::config
