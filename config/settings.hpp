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
  int compression_level = 0;
  byte_size shard_size;
  byte_size max_layer_size;
  byte_size large_file_warning;
  std::string external_symlinks;  // follow or refuse
  int hash_threads = 0;           // 0: one per core
  duration discover_timeout{};
};

struct nodes_settings {
  std::string provider;
  int count = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  duration idle_timeout{};
  duration ready_timeout{};
  duration poll_initial{};
  duration poll_max{};
  duration boot_delay{};
  byte_size cache_size;
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
  duration shutdown_grace{};
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
  paths dirs;
};

}  // namespace ferry::config
