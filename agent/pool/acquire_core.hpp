#pragma once
// One acquire of a lease in a team pool, sans-io: from what storage and the provider report, what to do
// next. The shell (reads and conditional PUTs in S3, a provider that makes nodes, a timer) carries out
// each step and reports back; the two speak as every sans-io core does (net/sans_io.hpp), one step at a
// time.
//
//   read_pool: list nodes/ and read every record, with its ETag
//     |  acquire() on the snapshot, at the `now` the read reports
//     +-- write_record: the chosen record, If-Match its ETag ----- written: finish with the lease
//     |        conflict (412): read again
//     +-- create_node NAME: the provider makes a node ---------- made: write_record, If-None-Match: *
//     |        conflict: another agent registered NAME first: read again, and register the node made
//     |        under the next free name; the pool being full now, go on as above among the nodes there
//     |        are, and hand the node made to the shell to end (made_node()) unless room comes back
//     +-- wait_until T: read again then (the shell may stop instead: a cancellation)
//     +-- refused: finish, failed
//
// A conflict means another agent's write landed between our read and our write, or our own did: a write
// sent again after its answer was lost fails its own condition. Reading again is always right: a read
// that finds this acquire's lease in the pool ends it with that lease, and one that finds the node made
// for it registered no longer holds that node as ours. `max_conflicts` conflicts in a row fail the acquire (pool_contended); a
// wait or a node made is progress and starts the count again.
//
// A transport error or a cancellation while a write runs ends the acquire without knowing whether the
// write landed: the core never assumes either. write_unsure() says so; the lease, if it landed, expires by
// itself at its expires_at, and the node, if its record landed, idles out. Errors are not retried here:
// the shell's requests go through net/retry, and what fails after that is the outcome. Nothing is owed
// after a cancellation, so every kind ends the acquire at once (a node being made then is the provider
// shell's to end, as any node whose making was cancelled).
#include "agent/pool/lease_core.hpp"
#include "net/cancellation.hpp"
#include "net/sans_io.hpp"

#include <optional>
#include <string>

namespace ferry::agent::pool {

struct acquire_action {
  enum class kind {
    read_pool,     // list and read the pool; report pool_read() or read_failed()
    write_record,  // PUT `write` with its condition; written(), write_conflict() or write_failed()
    create_node,   // make a node for the pool, to be named `node_id`; node_made() or node_failed()
    wait_until,    // nothing to do before `until`; then waited()
    finish,        // the outcome is held(), or failure()
  };
  kind what = kind::finish;
  std::optional<record_write> write;
  std::string node_id;
  pool_time until = 0;
};

// The lease an acquire ended with.
struct held_lease {
  std::string node_id;
  std::string etag;  // of the record as written: the next renew or release writes If-Match it
  pool_record record;
  lease granted;
  // Since when the node had held no lease when this acquire took it (none: it was busy, or it is new).
  // A node idle that long may have stopped itself (docs/pool.md): whoever finds it silent judges by it.
  std::optional<pool_time> idle_before;
};

class acquire_core {
 public:
  // `max_conflicts` below 1 counts as 1.
  acquire_core(lease_request request, pool_limits limits, int max_conflicts);

  acquire_action next() const { return action_; }
  bool done() const { return action_.what == acquire_action::kind::finish; }

  // Events: the outcome of the step next() handed out, and cancellations as the shell hears them.
  void pool_read(pool_snapshot snapshot, pool_time now);
  void read_failed(const error_code& ec, diagnostics diag);
  void written(std::string etag);
  void write_conflict();
  void write_failed(const error_code& ec, diagnostics diag);
  void node_made(new_node node, pool_time now);
  void node_failed(const error_code& ec, diagnostics diag);
  void waited();
  void cancelled(net::cancel_kind kind);

  // Once finished: the lease, or the failure with its diagnostics.
  const std::optional<held_lease>& held() const { return held_; }
  const error_code& failure() const { return error_; }
  const diagnostics& failure_diagnostics() const { return diag_; }
  // A write ran when the acquire ended without its outcome (a transport error or a cancellation).
  bool write_unsure() const { return write_unsure_; }
  // Once finished: a node made for this acquire that did not join the pool (or may not have, when
  // write_unsure()): the shell ends it.
  const std::optional<new_node>& made_node() const { return made_; }
  // Once finished with a lease: whether it is on a node made for this acquire, which joined the pool.
  bool joined() const { return held_ && registering_; }
  int conflicts() const { return conflicts_; }  // in all
  // The waits handed out (wait_until): how often the pool was full.
  int waits() const { return waits_; }

  // The error a cancellation ends the acquire with: operation_aborted, spelled without Asio.
  static error_code cancellation_error();

 private:
  void decide(const pool_snapshot& snapshot, pool_time now);
  void register_made(const std::string& node_id, pool_time now);
  void fail(const error_code& ec, diagnostics diag);
  void do_next(acquire_action::kind what);

  lease_request request_;
  pool_limits limits_;
  int max_conflicts_;
  acquire_action action_;
  std::optional<new_node> made_;   // made, and not yet in the pool
  pool_time made_at_ = 0;
  bool registering_ = false;       // the write that runs is the made node's first record
  std::optional<pool_time> idle_before_;  // of the node the write that runs leases on
  int conflicts_ = 0;
  int in_a_row_ = 0;
  int waits_ = 0;
  std::optional<held_lease> held_;
  bool write_unsure_ = false;
  error_code error_;
  diagnostics diag_;
};

static_assert(net::sans_io::core<acquire_core>);

}  // namespace ferry::agent::pool
