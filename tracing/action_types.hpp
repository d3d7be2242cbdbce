#pragma once
// Every action and message type ferry writes, for the code that writes them and the tests, views and
// benchmarks that read them. One place, so that a test that counts a name counts one that is really
// written, and a renamed step is renamed for its readers too. The strings are what the traces hold:
// changing one breaks every trace already written and every script that reads them.
//
// Grouped by what writes them. Each comment says what the step is and its notable fields: those of the
// start message, then "->" those its success adds. A message says so; every other name is an action. The
// root of each command also carries {ferry_version, pid} -> exit_code.
// Header-only and free of dependencies, for the node program's static build too.
#include <string_view>

namespace ferry::action_types {

// tracing/: eliot's own conventions.
namespace tracing {
// Message written by hand_off_task_id {level}: the level handed to a process that may never write to
// the trace (a user's command), so ferry's views know that level's silence is no lost message.
inline constexpr std::string_view handoff = "ferry:handoff";
}  // namespace tracing

// net/ssh: one SSH session and what runs over it.
namespace ssh {
// A session to a node {node, host, port, user}, with the handshake, host key check and login inside.
inline constexpr std::string_view connect = "ssh:connect";
inline constexpr std::string_view handshake = "ssh:handshake";  // -> kex, cipher
inline constexpr std::string_view host_key = "ssh:host_key";    // {node, known_hosts}
inline constexpr std::string_view auth = "ssh:auth";            // {user}: the login
// Message {method, key_file and fingerprint, or socket}: one way of logging in tried.
inline constexpr std::string_view auth_attempt = "ssh:auth_attempt";
// One command run to its end {node, command} -> exit_status, or exit_signal and core_dumped.
inline constexpr std::string_view exec = "ssh:exec";
inline constexpr std::string_view exec_bytes = "ssh:exec_bytes";  // message {stdout, stderr, stdin}: bytes moved
// Ending the process group of a command that may outlive its channel (cancelled, connection lost) {node}.
inline constexpr std::string_view kill = "ssh:kill";
inline constexpr std::string_view kill_group = "ssh:kill_group";  // message {pgid, grace_ms}
inline constexpr std::string_view upload = "ssh:upload";          // {node, path, bytes} -> sha256
inline constexpr std::string_view download = "ssh:download";      // {node, path} -> bytes, sha256
// One forwarded connection (net/ssh_forward.hpp) {node, to, from}: a workstation port reaching `to` as the
// node sees it -> to_node, from_node (bytes)
inline constexpr std::string_view forward = "ssh:forward";
}  // namespace ssh

// net/s3: the S3 client and its transfers.
namespace s3 {
// One attempt at one S3 request {attempt}; a failed one that is tried again ends with retry_in_ms.
inline constexpr std::string_view request = "s3:request";
// Message in each request attempt {operation, bucket, key, bytes}: what the request is.
inline constexpr std::string_view call = "s3:call";
// An upload in parts {bucket, key} -> parts, bytes; one upload_part {part, bytes} per part.
inline constexpr std::string_view multipart_upload = "s3:multipart_upload";
inline constexpr std::string_view upload_part = "s3:upload_part";
// An object downloaded to a file {bucket, key} -> bytes; its attempts are s3:request.
inline constexpr std::string_view download = "s3:download";
// Messages of net/stall_watch.hpp {endpoint, operation, object, quiet_s, calls}: storage has made no progress
// for net.stall_warning (again each time the quiet doubles), and for net.stall_limit (every call then ends).
inline constexpr std::string_view stall_warning = "s3:stall_warning";
inline constexpr std::string_view stalled = "s3:stalled";
}  // namespace s3

// packaging/: from sys.path to layers in storage.
namespace packaging {
// A pack: the root of `ferry pack`, its step {dry_run, explain}, and the pack step of a job.
inline constexpr std::string_view pack = "ferry:pack";
// Asking the project's Python for its sys.path {python, working_dir} -> cached, cache_stored, version,
// entries; with a probe {python} -> executable, version when the cache had no answer.
inline constexpr std::string_view discover = "ferry:packaging:discover";
inline constexpr std::string_view probe = "ferry:packaging:probe";
// Walking the roots into layers {roots} -> files, bytes, layers, cache_hits.
inline constexpr std::string_view walk = "ferry:packaging:walk";
// Hashing a layer's files the hash cache did not know {layer, files, to_hash, to_hash_bytes}.
inline constexpr std::string_view hash = "ferry:packaging:hash";
// The manifest: looked for in storage, written after the layers -> key, present, uploaded_shards,
// uploaded_bytes.
inline constexpr std::string_view manifest = "ferry:packaging:manifest";
// Message {key, reason}: the stored manifest is not the one this pack would write, and is written again.
inline constexpr std::string_view manifest_outdated = "ferry:packaging:manifest_outdated";
// Message {key, last_modified}: the found manifest was packaging.manifest_refresh old and is stored again,
// so that storage gc sees it in use.
inline constexpr std::string_view manifest_refreshed = "ferry:packaging:manifest_refreshed";
// A dry run's look at which shards storage holds {objects} -> present.
inline constexpr std::string_view check = "ferry:packaging:check";
// One shard zipped and uploaded {layer, key, files, bytes} -> zip_bytes, parts, sha256.
inline constexpr std::string_view upload = "ferry:packaging:upload";
// Aborting multipart uploads an interrupted pack left behind {prefix, max_age_s} -> found, aborted.
inline constexpr std::string_view sweep = "ferry:packaging:sweep";
inline constexpr std::string_view sweep_failed = "ferry:packaging:sweep_failed";  // message {key, reason}
// Messages {reason}: a cache that could not be saved, which costs the next pack time only.
inline constexpr std::string_view cache_not_saved = "ferry:packaging:cache_not_saved";
inline constexpr std::string_view digest_cache_not_saved = "ferry:packaging:digest_cache_not_saved";
// Messages {key}: a stored zip whose digest sidecar is missing, or describes other bytes {zip_bytes}.
inline constexpr std::string_view no_sidecar = "ferry:packaging:no_sidecar";
inline constexpr std::string_view bad_sidecar = "ferry:packaging:bad_sidecar";
// Message {key, layers, stored}: the order runs imported layers in, stored for the next pack
// (packaging/import_order.hpp).
inline constexpr std::string_view import_order = "ferry:packaging:import_order";
}  // namespace packaging

// `ferry storage` and the garbage collection in packaging/.
namespace storage {
// The root of every `ferry storage` command.
inline constexpr std::string_view command = "ferry:storage";
inline constexpr std::string_view ls = "ferry:storage:ls";            // {url} -> objects
inline constexpr std::string_view rm = "ferry:storage:rm";            // {url, recursive} -> objects
inline constexpr std::string_view presign = "ferry:storage:presign";  // {url, for_nodes}
inline constexpr std::string_view cp = "ferry:storage:cp";            // {source, destination} -> bytes
// Both `ferry storage gc` {older_than, delete} -> manifests, objects, bytes, and inside it the deletion
// itself {manifests, objects} -> bytes.
inline constexpr std::string_view gc = "ferry:storage:gc";
// What a gc would delete {prefix, max_age_s} -> live_manifests, manifests, objects, kept, bytes.
inline constexpr std::string_view gc_plan = "ferry:storage:gc_plan";
}  // namespace storage

namespace pool {
// The root of every `ferry pool` command.
inline constexpr std::string_view command = "ferry:pool";
// `ferry pool simulate`: the traced jobs replayed through each policy {policies} -> jobs, tenants.
inline constexpr std::string_view simulate = "ferry:pool:simulate";
// `ferry pool stats`: what the pool did in the traces {node_slots, idle_timeout} -> acquires, tenants, nodes.
inline constexpr std::string_view stats = "ferry:pool:stats";
// `ferry pool ls` {pool} -> nodes, unreadable.
inline constexpr std::string_view ls = "ferry:pool:ls";
// The pool's records read {prefix} -> nodes, unreadable; each record that does not parse {node, reason}.
inline constexpr std::string_view read = "ferry:pool:read";
inline constexpr std::string_view unreadable = "ferry:pool:unreadable";
// One conditional PUT of a record {node, condition} -> etag; failed with precondition_failed: a conflict.
inline constexpr std::string_view write = "ferry:pool:write";
// One lease taken {tenant, slots, lease} -> node, joined (on a node made for it, which joined the pool
// then), conflicts, waits; renewed {node, lease} -> expires_at;
// given back {node, lease}.
inline constexpr std::string_view acquire = "ferry:pool:acquire";
inline constexpr std::string_view renew = "ferry:pool:renew";
inline constexpr std::string_view release = "ferry:pool:release";
// A node made for an acquire that may not have joined the pool and was not ended {provider_id, address,
// reason when ending it failed}: its first record's write had no answer, or ending it failed.
inline constexpr std::string_view unregistered_node = "ferry:pool:unregistered_node";
// A lease the holder found lost while its work ran {node, lease, reason}: the work there is stopped.
inline constexpr std::string_view lease_lost = "ferry:pool:lease_lost";
// `ferry pool up` {pool, min_nodes} -> nodes, made; `ferry pool down` {pool, force} -> ended, kept.
inline constexpr std::string_view up = "ferry:pool:up";
inline constexpr std::string_view down = "ferry:pool:down";
// One conditional DELETE of a record {node, condition}; failed with precondition_failed: a conflict.
inline constexpr std::string_view remove = "ferry:pool:remove";
// A node's record removed because the node is gone (it stopped itself when idle) {node, reason}.
inline constexpr std::string_view node_left = "ferry:pool:node_left";
// A wait for room in a full pool {until}.
inline constexpr std::string_view wait = "ferry:pool:wait";
}  // namespace pool

// provision/: the node registry.
namespace registry {
// Before nodes are made: the registry can record them {file} -> nodes, or moved_to (a damaged file).
inline constexpr std::string_view check = "ferry:registry:check";
// A read-modify-write under the registry's lock {file} -> nodes: a node added (or replaced), updated or
// removed; the watchdogs `ferry nodes up` set recorded; hosts the ssh provider claims.
inline constexpr std::string_view add = "ferry:registry:add";
inline constexpr std::string_view update = "ferry:registry:update";
inline constexpr std::string_view remove = "ferry:registry:remove";
inline constexpr std::string_view watch = "ferry:registry:watch";
inline constexpr std::string_view claim = "ferry:registry:claim";
}  // namespace registry

// provision/readiness: waiting for a node to be running and to take an SSH login.
namespace readiness {
// One node {node, name} -> host, port, with its two stages, each {node, name} -> attempts, state.
inline constexpr std::string_view ready = "ferry:node:ready";
inline constexpr std::string_view wait_running = "ferry:node:wait_running";
inline constexpr std::string_view wait_ssh = "ferry:node:wait_ssh";
inline constexpr std::string_view poll = "ferry:node:poll";  // {attempt} -> state: one describe call
// One try at SSH {attempt}: a TCP connect {host, port}, the banner -> banner, the login {user}.
inline constexpr std::string_view ssh_attempt = "ferry:node:ssh_attempt";
inline constexpr std::string_view tcp_connect = "ferry:node:tcp_connect";
inline constexpr std::string_view ssh_banner = "ferry:node:ssh_banner";
inline constexpr std::string_view ssh_login = "ferry:node:ssh_login";
// All of a round's nodes {nodes}; when any is not ready, it fails with how many {failed}.
inline constexpr std::string_view nodes_ready = "ferry:nodes:ready";
}  // namespace readiness

// provision/local: nodes in network namespaces on this machine.
namespace local {
inline constexpr std::string_view create = "ferry:local:create";        // {count, boot_delay_ms}
inline constexpr std::string_view reserved = "ferry:local:reserved";    // message {node, name}: a name taken
inline constexpr std::string_view start = "ferry:local:start";          // {id, mode} -> address, port, pid
inline constexpr std::string_view host_key = "ferry:local:host_key";    // ssh-keygen of the node's host key
inline constexpr std::string_view network = "ferry:local:network";      // {netns} -> address, veth
inline constexpr std::string_view launch = "ferry:local:launch";        // {boot_delay_ms} -> pid of its sshd
inline constexpr std::string_view command = "ferry:local:command";      // message {command, exit_code}: an `ip`
inline constexpr std::string_view describe = "ferry:local:describe";    // {node} -> state
inline constexpr std::string_view terminate = "ferry:local:terminate";  // {node}
inline constexpr std::string_view stop = "ferry:local:stop";            // {id, pid, netns}
// Message {mnt_ns, net_ns}: every process of a stopped node is gone.
inline constexpr std::string_view processes_ended = "ferry:local:processes_ended";
inline constexpr std::string_view list = "ferry:local:list";  // {dir} -> nodes
// Message {reason}: a node record that could not be read, skipped by list.
inline constexpr std::string_view unreadable_record = "ferry:local:unreadable_record";
}  // namespace local

// provision/ssh: hosts that exist already, claimed and released.
namespace ssh_hosts {
inline constexpr std::string_view create = "ferry:ssh:create";      // {count, hosts} -> claimed
inline constexpr std::string_view describe = "ferry:ssh:describe";  // {node} -> state
inline constexpr std::string_view release = "ferry:ssh:release";    // {node}
inline constexpr std::string_view list = "ferry:ssh:list";
}  // namespace ssh_hosts

// provision/ec2: the EC2 provider and its API client.
namespace ec2 {
inline constexpr std::string_view create = "ec2:create";  // {count} -> created
// Message {instance_type, price, price_source}: the instance type the launch uses.
inline constexpr std::string_view type_chosen = "ec2:type_chosen";
// Instances of a launch that failed part way, terminated again {instances}.
inline constexpr std::string_view clean_up = "ec2:clean_up";
inline constexpr std::string_view describe = "ec2:describe";    // {node}
inline constexpr std::string_view terminate = "ec2:terminate";  // {node} -> already_gone
inline constexpr std::string_view list = "ec2:list";            // -> found
// The instance types and spot prices of a region {region} -> source (cache or api), types.
inline constexpr std::string_view catalogue = "ec2:catalogue";
// Message {file, stored, types, prices}: the catalogue fetched, and whether the cache file took it.
inline constexpr std::string_view catalogue_stored = "ec2:catalogue_stored";
// Message in each API call attempt {action, subject, endpoint}: what the call is about.
inline constexpr std::string_view call = "ec2:call";
// One attempt at a Query API call {attempt} is named "ec2:" and the call's Action.
inline constexpr std::string_view request_prefix = "ec2:";
inline constexpr std::string_view import_key_pair = "ec2:ImportKeyPair";
inline constexpr std::string_view run_instances = "ec2:RunInstances";
inline constexpr std::string_view describe_instances = "ec2:DescribeInstances";
inline constexpr std::string_view terminate_instances = "ec2:TerminateInstances";
inline constexpr std::string_view describe_instance_types = "ec2:DescribeInstanceTypes";
inline constexpr std::string_view describe_spot_price_history = "ec2:DescribeSpotPriceHistory";
// The Action an attempt's type names: "RunInstances" for ec2:RunInstances.
constexpr std::string_view api_action(std::string_view request_type) {
  return request_type.substr(request_prefix.size());
}
}  // namespace ec2

// agent/: a job's round of nodes, and their end.
namespace provision {
// A round of nodes for a job {count, provider} -> warm, created, failed; it ends when its last node is
// ready or has failed.
inline constexpr std::string_view round = "ferry:provision";
// Making nodes with the provider {count, provider} -> nodes.
inline constexpr std::string_view create = "ferry:provision:create";
// One node's life from create (or from the warm pool) to ready {node, warm}. It names the node from
// its start: `ferry trace stats` starts the node's provisioned time there.
inline constexpr std::string_view node = "ferry:provision:node";
// Message {node, reason}: a warm node that did not answer, ended and replaced.
inline constexpr std::string_view replace = "ferry:provision:replace";
// Message {node, reason}: the idle watchdog could not be set up; the node works, but will not stop itself.
inline constexpr std::string_view watchdog_failed = "ferry:provision:watchdog_failed";
// Ending a node, around every provider's own end (ec2:terminate, ferry:local:terminate,
// ferry:ssh:release) {node, provider}: `ferry trace stats` ends its provisioned time there.
inline constexpr std::string_view terminate = "ferry:provision:terminate";
// Message {node, reason}: a node that could not be ended, kept in the registry as orphaned.
inline constexpr std::string_view orphaned = "ferry:provision:orphaned";
}  // namespace provision

// agent/: the workstation's side of the work on a node.
namespace agent {
// One task of a map {node, submitted_at, task, input, attempt}, or a run's command {node, submitted_at,
// command}, on one node -> exit_code. `ferry trace stats` counts these as the busy time of nodes.
inline constexpr std::string_view task = "ferry:agent:task";
// Making a job's layers present on one node {node} -> workdir, layers_cached, layers_fetched,
// bytes_fetched, layers_evicted; the node program's node::materialise continues it on the node.
inline constexpr std::string_view materialise = "ferry:materialise";
// Fan-out {node, bind}: the node's `ferry-node serve` (agent/materialise/peer_serve.hpp) -> served, bytes.
inline constexpr std::string_view serve = "ferry:serve";
// Listing what to stage {bucket, prefix} -> objects, bytes.
inline constexpr std::string_view stage_plan = "ferry:stage:plan";
// Staging objects onto one node {node, source, node_dir, objects, bytes, window} -> fetched, kept,
// bytes_fetched, seconds, mb_per_s; the node program's node::stage continues it on the node.
inline constexpr std::string_view stage = "ferry:stage";
// The node's idle watchdog set {node, idle_timeout_ms, interval_ms}, or stopped {node, pinned}
// -> outcome; the node program's node::watchdog continues each on the node.
inline constexpr std::string_view watchdog_install = "ferry:watchdog:install";
inline constexpr std::string_view watchdog_uninstall = "ferry:watchdog:uninstall";
// The node's interpreter asked and compared with the packing one {node, python} -> version,
// implementation, platform, glibc; fails when it cannot run what was packed (agent/run/python_check.hpp).
inline constexpr std::string_view python_check = "ferry:agent:python_check";
// Message {stopped}: the job's work is over on every node (a map's last task ended); the steps of the
// nodes that had not begun it (`stopped` of them) end now, as cancelled.
inline constexpr std::string_view work_over = "ferry:agent:work_over";
}  // namespace agent

// agent/node/: the node program, whose messages continue ferry's task on the node.
namespace node {
// The node program's root: continues ferry's agent::materialise on that node. Its success carries the
// environment (workdir, python_path, layers_cached, layers_fetched, bytes_fetched, layers_evicted), and for
// a lazy start imported (layer names, first imported first) and layers_left (not fetched: the command
// ended first).
inline constexpr std::string_view materialise = "ferry:node:materialise";
inline constexpr std::string_view layer = "ferry:materialise:layer";      // {layer, name}: cached=true or fetched
inline constexpr std::string_view lock = "ferry:materialise:lock";        // waiting for another run's lock
inline constexpr std::string_view attempt = "ferry:materialise:attempt";  // {attempt}: one try at a layer
inline constexpr std::string_view shard = "ferry:materialise:shard";      // {layer, shard, bytes, source}: downloaded, entries
// {attempt}: a download of a shard cut short goes on from where its bytes end, with a Range request.
inline constexpr std::string_view resume = "ferry:materialise:resume";
// Fan-out (agent/materialise/fanout_plan.hpp). Message {url}: a peer serves this job's shards; first attempts go there.
inline constexpr std::string_view peer = "ferry:materialise:peer";
// `ferry-node serve`'s root: the job's shards handed to peers; its success carries requests, served,
// refused and bytes. Message {port}: it listens there.
inline constexpr std::string_view serve = "ferry:node:serve";
inline constexpr std::string_view listening = "ferry:serve:listening";
inline constexpr std::string_view cache = "ferry:materialise:cache";      // message {cache_dir}
inline constexpr std::string_view evicted = "ferry:materialise:evicted";  // message {layer, disk_bytes}
// Message {layer, name}: the layer's plan line came and it joined the queue. Its start after another layer's
// then reads as rank order (both were queued) or as arrival order (it came later).
inline constexpr std::string_view queued = "ferry:materialise:queued";
// Message {layer, shard}: a shard line came (agent/node/plan.hpp): a shard of a layer already queued is in
// storage now, and may be fetched.
inline constexpr std::string_view shard_line = "ferry:materialise:shard_line";
// Lazy start (agent/node/import_gate.hpp). Message {workdir, hook_dir, python_path, socket}: the workspace is in place,
// the command may start; ferry starts it on reading this.
inline constexpr std::string_view may_start = "ferry:materialise:may_start";
// Message {pid}: the command's first Python process asked the import hook's first question.
inline constexpr std::string_view command_started = "ferry:materialise:command_started";
// An import that waited {kind, name, layers} -> waited_ms; failed when a layer it needs failed.
inline constexpr std::string_view import_wait = "ferry:materialise:import_wait";  // {..., ids}
// Message {layers}: the layers the command imported, in the order it first imported them.
inline constexpr std::string_view imported = "ferry:materialise:imported";
// Message {layers, pending}: the last layer landed (pending 0), or the command ended first (pending > 0).
inline constexpr std::string_view all_landed = "ferry:materialise:all_landed";
// `ferry-node stage`'s root: continues ferry's agent::stage on that node; its success carries fetched,
// kept and bytes_fetched.
inline constexpr std::string_view stage = "ferry:node:stage";
inline constexpr std::string_view stage_object = "ferry:stage:object";    // {path, bytes}: one object fetched
inline constexpr std::string_view stage_attempt = "ferry:stage:attempt";  // {attempt}: one try at it
// `ferry-node watchdog`: the node's idle watchdog set; its success carries the outcome.
inline constexpr std::string_view watchdog = "ferry:node:watchdog";
// The program put in place by ferry {node, sha256, bytes}.
inline constexpr std::string_view install = "ferry:node:install";
// Written by ferry at the level handed to a node that lacked the program, which then wrote nothing there.
inline constexpr std::string_view absent = "ferry:node:absent";
}  // namespace node

// agent/api: `ferry api`, the agent half of the Python API, a job of `ferry trace stats` too.
namespace api {
inline constexpr std::string_view job = "ferry:api";  // the root of `ferry api`
// One worker on a node {node, slot}: a Python process that runs task after task.
inline constexpr std::string_view worker = "ferry:api:worker";
// An argument stored once for every task that names it {blob, bytes, sha256, stored}: stored is false
// when storage had it already.
inline constexpr std::string_view blob = "ferry:api:blob";
// Message {blob, node, source, fetch}: a worker was told of a blob, and where to fetch it first: its node's
// parent in the job's fan-out (http://HOST:PORT of that node's server), or storage. fetch: now, for the
// node's children, rather than when a task of its own needs it.
inline constexpr std::string_view offer = "ferry:api:blob:offer";
// Message {task, attempts, node}: a task's worker was lost; it goes to another worker.
inline constexpr std::string_view retry = "ferry:api:retry";
}  // namespace api

// agent/commands: `ferry run` and `ferry map`, the jobs of `ferry trace stats`.
namespace run {
inline constexpr std::string_view job = "ferry:run";              // the root of `ferry run`
inline constexpr std::string_view command = "ferry:run:command";  // message {command, nodes}
}  // namespace run

namespace map {
inline constexpr std::string_view job = "ferry:map";          // the root of `ferry map`
inline constexpr std::string_view tasks = "ferry:map:tasks";  // message {tasks, per_node, nodes}
// Message {node}: a node lost during the map; its task goes to another node.
inline constexpr std::string_view node_lost = "ferry:map:node_lost";
// Message {add, waiting, wait_seconds, task_seconds, node_seconds}: the map grows by `add` nodes because its
// waiting tasks would wait longer than a new node takes (agent/map/map_growth.hpp).
inline constexpr std::string_view grow = "ferry:map:grow";
}  // namespace map

// agent/commands: `ferry cluster`, and the holder of each cluster (agent/cluster/).
namespace cluster {
inline constexpr std::string_view up = "ferry:cluster:up";      // root of `cluster up` {name, nodes} -> reused
inline constexpr std::string_view down = "ferry:cluster:down";  // root of `cluster down`; per cluster {name}
inline constexpr std::string_view ls = "ferry:cluster:ls";      // root of `cluster ls`
inline constexpr std::string_view run = "ferry:cluster:run";    // root of `cluster run` {name, command} -> exit_code
inline constexpr std::string_view hold = "ferry:cluster:hold";  // root of the holder process {name, nodes}
// The scheduler process on its node {node} (ends when it ends); message scheduler_at {address, dashboard}
inline constexpr std::string_view scheduler = "ferry:cluster:scheduler";
inline constexpr std::string_view scheduler_at = "ferry:cluster:scheduler_at";
// A worker process on its node {node, scheduler}; message registered {node} once the scheduler has it
inline constexpr std::string_view worker = "ferry:cluster:worker";
inline constexpr std::string_view registered = "ferry:cluster:registered";
// A workstation port forwarded to the scheduler's node {what, listen, to}; each connection is an ssh:forward
inline constexpr std::string_view forwarding = "ferry:cluster:forwarding";
inline constexpr std::string_view ready = "ferry:cluster:ready";  // message {workers, seconds}
// Message {node, reason}: a worker's node was lost; then an action replace {node} -> the new node's work
inline constexpr std::string_view worker_lost = "ferry:cluster:worker_lost";
inline constexpr std::string_view replace = "ferry:cluster:replace";
inline constexpr std::string_view idle = "ferry:cluster:idle";  // message {idle_s}: the cluster ends for idleness
inline constexpr std::string_view client = "ferry:cluster:client";  // `cluster run`'s program {command} -> exit_code
}  // namespace cluster

// agent/commands: `ferry exec`.
namespace exec {
// The root of `ferry exec`, and its step {command} -> nodes.
inline constexpr std::string_view command = "ferry:exec";
inline constexpr std::string_view node = "ferry:exec:node";  // the command on one node {node} -> exit_code
}  // namespace exec

// agent/commands: `ferry nodes`.
namespace nodes {
inline constexpr std::string_view command = "ferry:nodes";    // the root of every `ferry nodes` command
inline constexpr std::string_view up = "ferry:nodes:up";      // {count} -> ready
inline constexpr std::string_view ls = "ferry:nodes:ls";      // -> nodes
inline constexpr std::string_view down = "ferry:nodes:down";  // {all} -> ended
// The idle watchdogs of `ferry nodes up` {min_nodes, idle_timeout_ms} -> pinned, changed.
inline constexpr std::string_view watch = "ferry:nodes:watch";
}  // namespace nodes

// agent/commands: `ferry doctor`.
namespace doctor {
inline constexpr std::string_view command = "ferry:doctor";  // the root
// One check {check} -> detail; a failed one ends with its fix, a skipped one with skipped.
inline constexpr std::string_view check = "ferry:doctor:check";
// Message in a check {operation, status}: one request it made to storage, and the HTTP status it got.
inline constexpr std::string_view request = "ferry:doctor:request";
}  // namespace doctor

// agent/commands: `ferry trace`, whose roots are their names. stats, html and otlp also name their step.
namespace trace {
// What every root of `ferry trace` starts with: a view without a file never reads a view's own trace.
inline constexpr std::string_view prefix = "ferry:trace:";
inline constexpr std::string_view tree = "ferry:trace:tree";
inline constexpr std::string_view chrome = "ferry:trace:chrome";
inline constexpr std::string_view stats = "ferry:trace:stats";  // the step -> jobs
inline constexpr std::string_view html = "ferry:trace:html";    // the step -> bytes
inline constexpr std::string_view otlp = "ferry:trace:otlp";    // the step -> spans, events, lines
inline constexpr std::string_view read = "ferry:trace:read";    // {files} -> messages, skipped_lines
}  // namespace trace

// agent/: the roots of the other commands, and the configuration every command loads first.
namespace cli {
inline constexpr std::string_view version = "ferry:version";
inline constexpr std::string_view warmup = "ferry:warmup";  // packs and puts the layers on warm nodes
inline constexpr std::string_view config_show = "ferry:config:show";
inline constexpr std::string_view config_load = "ferry:config:load";  // -> files
}  // namespace cli

}  // namespace ferry::action_types
