#include "agent/pool/acquire_core.hpp"

#include "agent/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <utility>

namespace ferry::agent::pool {

error_code acquire_core::cancellation_error() {
  // Asio's operation_aborted is ECANCELED in the system category on POSIX (as multipart_upload_core).
  return {ECANCELED, boost::system::system_category()};
}

acquire_core::acquire_core(lease_request request, pool_limits limits, int max_conflicts)
    : request_(std::move(request)), limits_(limits), max_conflicts_(std::max(1, max_conflicts)) {
  action_.what = acquire_action::kind::read_pool;
}

void acquire_core::do_next(acquire_action::kind what) {
  action_ = {};
  action_.what = what;
}

void acquire_core::fail(const error_code& ec, diagnostics diag) {
  error_ = ec;
  diag_ = std::move(diag);
  do_next(acquire_action::kind::finish);
}

void acquire_core::pool_read(pool_snapshot snapshot, pool_time now) {
  assert(action_.what == acquire_action::kind::read_pool);
  decide(snapshot, now);
}

void acquire_core::decide(const pool_snapshot& snapshot, pool_time now) {
  // A write of ours may have landed although its answer was lost: the request was sent again and failed
  // its own condition, which looked like a conflict. Then the lease is in the pool already, and it is ours.
  for (const auto& e : snapshot.nodes) {
    const auto* l = find_lease(e.record, request_.lease_id);
    if (!l || l->expired(now)) continue;
    if (made_ && e.record.provider == made_->provider && e.record.provider_id == made_->provider_id) made_.reset();
    held_ = held_lease{e.record.node_id, e.etag, e.record, *l};
    return do_next(acquire_action::kind::finish);
  }
  // The node made for this acquire is in the pool already (its first record landed, as above): it is no
  // longer ours to register or end.
  if (made_)
    for (const auto& e : snapshot.nodes)
      if (e.record.provider == made_->provider && e.record.provider_id == made_->provider_id) made_.reset();
  // A node made, whose name another agent registered first, joins under the next free name while the
  // pool has room. Once the pool is full it cannot join: the acquire goes on among the nodes there are
  // (and registers it after all if room comes back while it waits), and the shell ends it if it is still
  // out at the finish. The tenant's cap is not asked again: the node exists and costs the same either way.
  if (made_ && static_cast<int>(snapshot.size()) < limits_.max_nodes) {
    for (int i = 0; i < limits_.max_nodes; ++i)
      if (!snapshot.has_name(node_name(i))) return register_made(node_name(i), now);
  }
  auto d = acquire(snapshot, now, request_, limits_);
  switch (d.what) {
    case acquire_decision::kind::write:
      idle_before_.reset();
      for (const auto& e : snapshot.nodes)
        if (e.record.node_id == d.write->node_id) idle_before_ = idle_from(e.record, now);
      do_next(acquire_action::kind::write_record);
      action_.write = std::move(d.write);
      return;
    case acquire_decision::kind::create:
      do_next(acquire_action::kind::create_node);
      action_.node_id = std::move(d.node_id);
      return;
    case acquire_decision::kind::wait:
      ++waits_;
      in_a_row_ = 0;
      do_next(acquire_action::kind::wait_until);
      action_.until = d.until;
      return;
    case acquire_decision::kind::refuse: {
      diagnostics diag;
      diag.set(std::move(d.reason));
      return fail(d.error, std::move(diag));
    }
  }
}

void acquire_core::register_made(const std::string& node_id, pool_time now) {
  diagnostics diag;
  auto w = register_node(node_id, *made_, now, request_, diag);
  if (!w) return fail(w.error(), std::move(diag));
  // Its lease counts from `now` (the read it was decided on); the node was made when it was made.
  w->record.created_at = made_at_;
  registering_ = true;
  do_next(acquire_action::kind::write_record);
  action_.write = std::move(*w);
}

void acquire_core::read_failed(const error_code& ec, diagnostics diag) {
  assert(action_.what == acquire_action::kind::read_pool);
  fail(ec, std::move(diag));
}

void acquire_core::written(std::string etag) {
  assert(action_.what == acquire_action::kind::write_record);
  auto& w = *action_.write;
  const auto* granted = find_lease(w.record, request_.lease_id);
  assert(granted);
  held_ = held_lease{w.node_id, std::move(etag), w.record, *granted, registering_ ? std::nullopt : idle_before_};
  if (registering_) made_.reset();
  do_next(acquire_action::kind::finish);
}

void acquire_core::write_conflict() {
  assert(action_.what == acquire_action::kind::write_record);
  ++conflicts_;
  registering_ = false;
  if (++in_a_row_ >= max_conflicts_) {
    diagnostics d;
    d.set(fmt::format("{} writes in a row to the pool's records lost to other agents' writes; giving up",
                      in_a_row_));
    return fail(make_error_code(errc::pool_contended), std::move(d));
  }
  do_next(acquire_action::kind::read_pool);
}

void acquire_core::write_failed(const error_code& ec, diagnostics diag) {
  assert(action_.what == acquire_action::kind::write_record);
  write_unsure_ = true;
  fail(ec, std::move(diag));
}

void acquire_core::node_made(new_node node, pool_time now) {
  assert(action_.what == acquire_action::kind::create_node);
  made_ = std::move(node);
  made_at_ = now;
  in_a_row_ = 0;
  register_made(action_.node_id, now);
}

void acquire_core::node_failed(const error_code& ec, diagnostics diag) {
  assert(action_.what == acquire_action::kind::create_node);
  fail(ec, std::move(diag));
}

void acquire_core::waited() {
  assert(action_.what == acquire_action::kind::wait_until);
  do_next(acquire_action::kind::read_pool);
}

void acquire_core::cancelled(net::cancel_kind) {
  if (done()) return;
  if (action_.what == acquire_action::kind::write_record) write_unsure_ = true;
  fail(cancellation_error(), {});
}

}  // namespace ferry::agent::pool
