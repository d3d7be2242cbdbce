#include "agent/map/map_run.hpp"

#include "agent/error.hpp"
#include "agent/cli/json_output.hpp"
#include "agent/map/map_growth.hpp"
#include "agent/map/map_inputs.hpp"
#include "agent/provide/node_watchdog.hpp"
#include "agent/run/ignored_hint.hpp"
#include "agent/run/task_outcome.hpp"
#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/exec_streams.hpp"
#include "net/node_link.hpp"
#include "net/run_all.hpp"
#include "net/task_group.hpp"
#include "tracing/action_types.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>

namespace ferry::agent {

namespace json = boost::json;

// The task's line is written, and its output let go: ten thousand tasks must not all stay in memory.
void record_task(map_state& st, map_task& t) {
  json::object line{{"task", t.index},   {"input", t.input},       {"exit_code", t.exit_code},
                    {"node", t.node},    {"attempts", t.attempts}, {"seconds", json_seconds(t.seconds)},
                    {"ok", t.now == map_task::state::done}};
  if (!t.error.empty()) line["error"] = t.error;
  if (st.output.empty()) {
    line["stdout"] = t.out;
    line["stderr"] = t.err;
  } else {
    std::ofstream(st.output / fmt::format("{}.out", t.index), std::ios::binary) << t.out;
    std::ofstream(st.output / fmt::format("{}.err", t.index), std::ios::binary) << t.err;
  }
  if (st.progress && st.results == stdout) st.progress->clear();
  fmt::print(st.results, "{}\n", json_line(line));
  std::fflush(st.results);
  std::string().swap(t.out);
  std::string().swap(t.err);
}

namespace {

// One attempt of task i on this node. Returns false when the node is lost.
asio::awaitable<bool> attempt(tracing::action& job_act, job_node& jn, map_state& st, std::size_t i) {
  auto& t = st.schedule.task(i);
  auto task = job_act.child(action_types::agent::task, {{"node", jn.ready.node.id},
                                                        {"submitted_at", st.submitted_at},
                                                        {"task", i},
                                                        {"input", t.input},
                                                        {"attempt", t.attempts}});
  net::collect_sink sink(st.output_limit);
  net::exec_request request;
  const auto line = task_command(jn.env, task.hand_off_task_id(), st.vars, task_argv(st.command, t.input));
  request.command = command_for(jn.ready.node, line.command);
  net::buffer_source env_input(line.input);
  if (!line.input.empty()) request.input = &env_input;
  request.output = &sink;
  const auto begin = std::chrono::steady_clock::now();
  if (!st.first_task) st.first_task = begin;
  diagnostics diag;
  auto done = co_await jn.ready.link->exec(task, request, diag);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  t.out = std::move(sink.out);
  t.err = std::move(sink.err);
  if (done) {
    const int code = exit_code_of(*done);
    const auto v = st.schedule.exited(i, code);
    if (code == 0) {
      task.succeed({{"exit_code", 0}});
    } else {
      task.fail_exception("exit", fmt::format("exit code {}", code));
    }
    // A failure's cause, if the ignore rules made it (agent/run/ignored_hint.hpp): said once for all alike.
    std::string tail = v == map_schedule::verdict::failed ? t.err.substr(t.err.size() > 4096 ? t.err.size() - 4096 : 0)
                                                          : std::string();
    if (v != map_schedule::verdict::retry) {
      st.durations.push_back(t.seconds);
      st.durations_sum += t.seconds;
      record_task(st, t);
    }
    if (!tail.empty()) {
      auto hint = co_await ignored_hint(*st.ctx, std::move(tail), jn.env.workdir);
      if (hint && st.hints.insert(*hint).second) {
        if (st.progress) st.progress->clear();  // the hint's own line, not the end of the progress line
        fmt::print(stderr, "ferry: hint: {}\n", *hint);
      }
    }
    co_return true;
  }
  task.fail(done.error(), diag);
  const auto why = describe(done.error(), diag);
  if (co_await net::cancelled()) {
    // Cut short by Ctrl-C: neither done nor failed, and the summary says so.
    t.error = "interrupted";
    record_task(st, t);
    co_return false;
  }
  if (done.error() == net::errc::output_too_large) {
    st.schedule.broke(i, why);
    record_task(st, t);
    co_return true;
  }
  if (st.schedule.node_lost(i, fmt::format("node {}: {}", jn.ready.node.id, why)) == map_schedule::verdict::failed) {
    record_task(st, t);
  }
  co_return false;
}

struct node_slot {
  bool lost = false;
};

asio::awaitable<void> worker(tracing::action& job_act, job_node& jn, map_state& st, node_slot& slot) {
  co_await net::accept_cancellation();
  while (!st.schedule.finished() && !slot.lost) {
    if (co_await net::cancelled()) break;  // no task starts once the map is cancelled
    auto next = st.schedule.take(jn.ready.node.id, st.live_nodes);
    if (!next) {
      if (!co_await st.wait()) break;
      continue;
    }
    bool lost_now = false;
    if (!co_await attempt(job_act, jn, st, *next) && !slot.lost) {
      slot.lost = lost_now = true;
      ++st.lost_nodes;
    }
    // The last task ended: nothing waits for the nodes that have not begun, nor for layers no task took.
    if (st.schedule.finished()) {
      st.the_job->work_ended();
      st.the_job->work_over();
    }
    // Waiting workers wake only when there is something for them: a task back in the queue, the end of
    // the map, or a lost node to replace. Waking all thousand of them after every task is quadratic.
    if (st.schedule.waiting() > 0 || st.schedule.finished() || lost_now) st.notify();
    if (co_await net::cancelled()) break;
  }
}

// What a task takes, as far as the map has seen: the mean of those that ended; 0 before any has.
double task_seconds(const map_state& st) {
  return st.durations.empty() ? 0 : st.durations_sum / static_cast<double>(st.durations.size());
}

// The nodes' work ends with the map; the sizer is told, since a node added after the job's first ones were
// all lost is the last one working, and it may be lost too.
asio::awaitable<void> more_nodes(job& j, map_state& st, std::size_t count) {
  ++st.adding;
  co_await j.add_nodes(count);
  --st.adding;
  st.notify();
}

}  // namespace

asio::awaitable<void> map_on_node(tracing::action& job_act, job_node& jn, map_state& st) {
  node_slot slot;
  ++st.live_nodes;
  std::vector<asio::awaitable<void>> workers;
  for (std::size_t k = 0; k < st.per_node; ++k) workers.push_back(worker(job_act, jn, st, slot));
  co_await net::run_all(std::move(workers));
  --st.live_nodes;
  if (slot.lost) job_act.log(action_types::map::node_lost, {{"node", jn.ready.node.id}});
  st.notify();
}

// The map's size while it runs, up to nodes.max_nodes in all: a lost node is replaced while tasks wait,
// and the map grows when its waiting tasks would wait longer than a new node takes (map_growth.hpp).
// Nodes it adds come in beside the work; it waits for them before it ends.
asio::awaitable<void> map_sizer(tracing::action& act, job& j, map_state& st, std::size_t max_nodes) {
  co_await net::accept_cancellation();
  net::task_group adding(co_await asio::this_coro::executor);
  std::size_t replaced = 0;
  while (!st.schedule.finished()) {
    if (st.lost_nodes > replaced && st.started_nodes < max_nodes && st.schedule.waiting() > 0) {
      ++replaced;
      ++st.started_nodes;
      adding.spawn(more_nodes(j, st, 1));
      continue;
    }
    map_pace pace{st.schedule.waiting(), st.started_nodes - st.lost_nodes, st.per_node, max_nodes, task_seconds(st),
                  j.new_node_seconds()};
    auto g = growth_of(pace);
    g.add = std::min(g.add, max_nodes - std::min(max_nodes, st.started_nodes));  // lost nodes count too
    if (g.add > 0) {
      if (st.progress) st.progress->clear();  // the line of its own, not the end of the progress line
      fmt::print(stderr, "ferry: map: {}\n", growth_line(pace, g));
      act.log(action_types::map::grow, {{"add", g.add}, {"waiting", pace.waiting}, {"wait_seconds", g.wait_seconds},
                                        {"task_seconds", pace.task_seconds}, {"node_seconds", pace.node_seconds}});
      st.started_nodes += g.add;
      adding.spawn(more_nodes(j, st, g.add));
      continue;
    }
    // The job's first nodes are done; nodes this added may still be working, and may yet be lost.
    if (st.job_over && st.adding == 0) break;
    if (!co_await st.wait()) break;
  }
  if (co_await net::cancelled()) adding.cancel();
  co_await adding.wait(true);  // Ctrl-C while they finish reaches them too
}

asio::awaitable<void> run_map_job(job& j, map_state& st, std::size_t count, job_work work, diagnostics& diag,
                              result<void>& out) {
  co_await net::accept_cancellation();
  out = co_await j.run(count, std::move(work), diag);
  if (st.progress) st.progress->stop();
  st.job_over = true;
  st.notify();
}

}  // namespace ferry::agent
