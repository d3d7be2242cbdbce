#include "agent/pool/pool_lease.hpp"

#include "agent/error.hpp"
#include "net/cancellation.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace ferry::agent::pool {
namespace {

namespace asio = boost::asio;

// A timer for `seconds`; false when cancelled.
asio::awaitable<bool> sleep_for(pool_time seconds) {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::seconds(std::max<pool_time>(0, seconds)));
  error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

// One step of the core carried out, its outcome reported back.
class acquire_shell {
 public:
  acquire_shell(tracing::action& act, pool_store& store, acquire_core& core, const acquire_settings& s,
                const node_maker& make, const pool_clock& now)
      : act_(act), store_(store), core_(core), settings_(s), make_(make), now_(now), started_(now()) {}

  // False when the acquire must end here without the core: the pool stayed full past max_wait.
  asio::awaitable<bool> step() {
    const auto a = core_.next();
    diagnostics d;
    switch (a.what) {
      case acquire_action::kind::read_pool: {
        auto snapshot = co_await store_.read(act_, d);
        if (snapshot)
          core_.pool_read(std::move(*snapshot), now_());
        else
          core_.read_failed(snapshot.error(), std::move(d));
        break;
      }
      case acquire_action::kind::write_record: {
        auto etag = co_await store_.write(act_, *a.write, d);
        if (etag)
          core_.written(std::move(*etag));
        else if (etag.error() == net::errc::precondition_failed)
          core_.write_conflict();
        else
          core_.write_failed(etag.error(), std::move(d));
        break;
      }
      case acquire_action::kind::create_node: {
        if (!make_) {
          d.set("the pool has room for another node, and this command cannot make one");
          core_.node_failed(make_error_code(errc::pool_full), std::move(d));
          break;
        }
        auto made = co_await make_(act_, a.node_id, d);
        if (made)
          core_.node_made(std::move(*made), now_());
        else
          core_.node_failed(made.error(), std::move(d));
        break;
      }
      case acquire_action::kind::wait_until: {
        const auto deadline = started_ + static_cast<pool_time>(settings_.max_wait.count());
        if (a.until > deadline) co_return false;
        auto wait = act_.child(action_types::pool::wait, {{"until", a.until}});
        const bool slept = co_await sleep_for(a.until - now_());
        wait.succeed();
        if (slept)
          core_.waited();
        else
          core_.cancelled(net::cancel_kind::total);
        break;
      }
      case acquire_action::kind::finish:
        break;
    }
    co_return true;
  }

  pool_time started() const { return started_; }

 private:
  tracing::action& act_;
  pool_store& store_;
  acquire_core& core_;
  const acquire_settings& settings_;
  const node_maker& make_;
  const pool_clock& now_;
  pool_time started_;
};

}  // namespace

pool_time wall_clock_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

asio::awaitable<result<held_lease>> acquire_lease(tracing::action& parent, pool_store& store,
                                                  const lease_request& request, const acquire_settings& settings,
                                                  const node_maker& make, const pool_clock& now, diagnostics& diag) {
  auto act = parent.child(action_types::pool::acquire,
                          {{"tenant", request.tenant}, {"slots", request.slots}, {"lease", request.lease_id}});
  acquire_core core(request, settings.limits, settings.max_conflicts);
  acquire_shell shell(act, store, core, settings, make, now);
  bool full = false;
  while (!core.done()) {
    if (co_await net::cancelled()) {
      core.cancelled(net::cancel_kind::total);
      break;
    }
    if (!co_await shell.step()) {
      full = true;
      core.cancelled(net::cancel_kind::total);  // ends it: a wait has nothing outstanding
    }
  }
  // A node made for this acquire that did not join the pool has no owner but the provider: say so.
  if (const auto& made = core.made_node())
    act.log(action_types::pool::unregistered_node, {{"provider_id", made->provider_id}, {"address", made->address}});
  const int conflicts = core.conflicts(), waits = core.waits();
  if (full) {
    diag.set(fmt::format("pool {}: no room for {} slot(s) of {} within {} s (pool.max_wait); every node is leased",
                         store.where().prefix, request.slots, request.tenant, settings.max_wait.count()));
    act.fail(make_error_code(errc::pool_full), diag, {{"conflicts", conflicts}, {"waits", waits}});
    co_return make_error_code(errc::pool_full);
  }
  if (!core.held()) {
    diag = core.failure_diagnostics();
    act.fail(core.failure(), diag, {{"conflicts", conflicts}, {"waits", waits}});
    co_return core.failure();
  }
  auto out = *core.held();
  act.succeed({{"node", out.node_id}, {"conflicts", conflicts}, {"waits", waits}});
  co_return out;
}

asio::awaitable<result<held_lease>> renew_lease(tracing::action& parent, pool_store& store, held_lease held,
                                                pool_time ttl, int max_conflicts, const pool_clock& now,
                                                diagnostics& diag) {
  auto act = parent.child(action_types::pool::renew, {{"node", held.node_id}, {"lease", held.granted.id}});
  // First with the record as this agent last wrote it: nobody else has written it, most of the time.
  pool_entry entry{held.record, held.etag};
  for (int conflicts = 0;; ++conflicts) {
    auto w = renew(entry, held.granted.id, now(), ttl, diag);
    if (!w) {
      act.fail(w.error(), diag);
      co_return w.error();
    }
    auto etag = co_await store.write(act, *w, diag);
    if (etag) {
      held.etag = std::move(*etag);
      held.record = w->record;
      if (const auto* l = find_lease(held.record, held.granted.id)) held.granted = *l;
      act.succeed({{"expires_at", held.granted.expires_at}, {"conflicts", conflicts}});
      co_return held;
    }
    if (etag.error() != net::errc::precondition_failed || conflicts + 1 >= std::max(1, max_conflicts)) {
      act.fail(etag.error(), diag);
      co_return etag.error();
    }
    auto fresh = co_await store.read_one(act, held.node_id, diag);
    if (!fresh) {
      act.fail(fresh.error(), diag);
      co_return fresh.error();
    }
    if (!*fresh) {
      diag.set(fmt::format("node {} left the pool: lease {} is lost", held.node_id, held.granted.id));
      act.fail(make_error_code(errc::lease_lost), diag);
      co_return make_error_code(errc::lease_lost);
    }
    entry = std::move(**fresh);
  }
}

asio::awaitable<result<void>> release_lease(tracing::action& parent, pool_store& store, const held_lease& held,
                                            int max_conflicts, const pool_clock& now, diagnostics& diag) {
  auto act = parent.child(action_types::pool::release, {{"node", held.node_id}, {"lease", held.granted.id}});
  pool_entry entry{held.record, held.etag};
  for (int conflicts = 0;; ++conflicts) {
    auto w = release(entry, held.granted.id, now());
    if (!w) {  // gone already: it expired and another write dropped it
      act.succeed({{"gone", true}});
      co_return result<void>{};
    }
    auto etag = co_await store.write(act, *w, diag);
    if (etag) {
      act.succeed({{"conflicts", conflicts}});
      co_return result<void>{};
    }
    if (etag.error() != net::errc::precondition_failed || conflicts + 1 >= std::max(1, max_conflicts)) {
      act.fail(etag.error(), diag);
      co_return etag.error();
    }
    auto fresh = co_await store.read_one(act, held.node_id, diag);
    if (!fresh) {
      act.fail(fresh.error(), diag);
      co_return fresh.error();
    }
    if (!*fresh) {
      act.succeed({{"gone", true}});
      co_return result<void>{};
    }
    entry = std::move(**fresh);
  }
}

}  // namespace ferry::agent::pool
