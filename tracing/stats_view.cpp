#include "tracing/stats_view.hpp"

#include "tracing/action_types.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace ferry::tracing {
namespace {

namespace json = boost::json;

std::string percent(double share) { return fmt::format("{:.1f}%", share * 100); }

std::string time_text(double ts) {
  const auto secs = static_cast<std::time_t>(ts);
  const auto ms = static_cast<int>((ts - static_cast<double>(secs)) * 1000.0);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:03}Z", fmt::gmtime(secs), ms);
}

class text_report {
 public:
  explicit text_report(const trace_stats& s) : s_(s) {}

  std::string render() {
    summary();
    action_types();
    if (s_.jobs.empty()) {
      // Qualified: this class's action_types() hides the namespace.
      out_ += fmt::format("\nno runs or maps ({}, {}) in these traces\n", ferry::action_types::run::job,
                          ferry::action_types::map::job);
      return std::move(out_);
    }
    pending();
    usage();
    overlaps();
    critical_paths();
    return std::move(out_);
  }

 private:
  void summary() {
    out_ += fmt::format("{} files, {} messages, {} eliot tasks", s_.files, s_.messages, s_.eliot_tasks);
    if (!s_.incomplete_eliot_tasks.empty()) out_ += fmt::format(" ({} incomplete)", s_.incomplete_eliot_tasks.size());
    out_ += fmt::format(", {} runs and maps\n", s_.jobs.size());
    if (!s_.problems.empty())
      out_ += fmt::format("{} malformed lines skipped (each reported as an error)\n", s_.problems.size());
    for (const auto& uuid : s_.incomplete_eliot_tasks) out_ += fmt::format("incomplete task: {}\n", uuid);
  }

  void action_types() {
    std::size_t width = 11;
    for (const auto& t : s_.action_types) width = std::max(width, t.action_type.size());
    out_ += fmt::format("\n{:<{}}  {:>7} {:>7} {:>9} {:>10}  {:>9} {:>9} {:>9} {:>9}  (seconds)\n", "action type",
                        width, "count", "failed", "cancelled", "incomplete", "p50", "p90", "p99", "max");
    for (const auto& t : s_.action_types)
      out_ += fmt::format("{:<{}}  {:>7} {:>7} {:>9} {:>10}  {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n", t.action_type,
                          width, t.count, t.failures, t.cancelled, t.incomplete, t.duration.p50, t.duration.p90, t.duration.p99,
                          t.duration.max);
  }

  void pending_row(std::string_view name, const pending_stats& p) {
    out_ += fmt::format("{:<16} {:>7}  {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}  {:>6} {:>6} {:>6}\n", name,
                        p.seconds.count, p.seconds.p50, p.seconds.p90, p.seconds.p99, p.seconds.max,
                        percent(p.within_2s), percent(p.within_5s), percent(p.within_60s));
  }

  void pending() {
    out_ += "\npending time, from submission to a task's start (seconds)\n";
    out_ += fmt::format("{:<16} {:>7}  {:>9} {:>9} {:>9} {:>9}  {:>6} {:>6} {:>6}\n", "jobs", "tasks", "p50", "p90",
                        "p99", "max", "<=2s", "<=5s", "<=60s");
    for (const auto& t : s_.job_types) pending_row(t.action_type, t.pending);
    pending_row("all", s_.pending_summary);
  }

  void usage_row(std::string_view name, const utilisation& u) {
    out_ += fmt::format("{:<16} {:>14.3f} {:>14.3f}  {:>11} {:>9}\n", name, u.busy_node_seconds,
                        u.provisioned_node_seconds, u.measured() ? percent(u.ratio()) : "-",
                        u.measured() ? percent(u.overhead()) : "-");
  }

  void usage() {
    out_ += fmt::format("\nnode utilisation\n{:<16} {:>14} {:>14}  {:>11} {:>9}\n", "jobs", "busy node-s",
                        "provisioned", "utilisation", "overhead");
    for (const auto& t : s_.job_types) usage_row(t.action_type, t.usage);
    usage_row("all", s_.usage);
  }

  // A layer reaches the nodes shard by shard as the pack stores it: how much of their fetching that
  // overlapped with the pack, and how soon after its upload a shard was fetched.
  void overlaps() {
    bool any = false;
    for (const auto& j : s_.jobs) any = any || j.overlap.measured();
    if (!any) return;
    out_ += "\nnode fetching during the pack (seconds)\n";
    for (const auto& j : s_.jobs) {
      const auto& o = j.overlap;
      if (!o.measured()) continue;
      out_ += fmt::format("{} {}: pack {:.3f} s; node fetch started before the pack ended: {:.3f} s of {:.3f} s "
                          "({} of {} shard fetches)",
                          j.action_type, j.task_uuid, o.pack.length(), o.fetching_in_pack, o.fetching,
                          o.fetches_early, o.fetches);
      if (o.upload_to_fetch.count > 0)
        out_ += fmt::format("; from a shard's upload to its first fetch p50 {:.3f} max {:.3f} ({} shards)",
                            o.upload_to_fetch.p50, o.upload_to_fetch.max, o.upload_to_fetch.count);
      out_ += "\n";
    }
  }

  void critical_paths() {
    out_ += "\ncritical paths (each link: start from the job's start, length, share of the job)\n";
    for (const auto& j : s_.jobs) {
      out_ += fmt::format("{} {} {} {:.3f} s {}{}, {} tasks ({} failed, {}{} incomplete), utilisation {}\n",
                          j.action_type, j.task_uuid, time_text(j.time.begin), j.time.length(), j.status,
                          j.complete ? "" : " (incomplete)", j.tasks, j.failed_tasks,
                          j.cancelled_tasks ? fmt::format("{} cancelled, ", j.cancelled_tasks) : "",
                          j.incomplete_tasks,
                          j.usage.measured() ? percent(j.usage.ratio()) : "-");
      for (const auto& l : j.path.links)
        if (l.folded)
          out_ += fmt::format("  {:>+10.3f} {:>9.3f} {:>6}  {:{}}… {} steps of 0.000 s{}\n", l.begin - j.time.begin,
                              l.duration(), percent(l.share), "", l.depth * 2, l.folded,
                              l.action_type.empty() ? "" : " (" + l.action_type + ")");
        else
          out_ += fmt::format("  {:>+10.3f} {:>9.3f} {:>6}  {:{}}{}{}{}\n", l.begin - j.time.begin, l.duration(),
                            percent(l.share), "", l.depth * 2, l.action_type.empty() ? "?" : l.action_type,
                            l.node.empty() ? "" : " node=" + l.node,
                            l.status == "started" ? " (incomplete)" : l.status == "succeeded" ? "" : " (" + l.status + ")");
    }
  }

  const trace_stats& s_;
  std::string out_;
};

json::object percentiles_json(const percentiles& p) {
  return {{"count", p.count}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

json::object pending_json(const pending_stats& p) {
  auto o = percentiles_json(p.seconds);
  o["within_2s"] = p.within_2s;
  o["within_5s"] = p.within_5s;
  o["within_60s"] = p.within_60s;
  return o;
}

json::object usage_json(const utilisation& u) {
  json::object o{{"busy_node_seconds", u.busy_node_seconds}, {"provisioned_node_seconds", u.provisioned_node_seconds}};
  o["utilisation"] = u.measured() ? json::value(u.ratio()) : json::value(nullptr);
  o["overhead"] = u.measured() ? json::value(u.overhead()) : json::value(nullptr);
  return o;
}

json::object overlap_json(const fetch_overlap& o) {
  json::object out{{"measured", o.measured()}, {"fetches", o.fetches}, {"fetches_before_pack_end", o.fetches_early},
                   {"fetching_seconds", o.fetching}, {"fetching_before_pack_end_seconds", o.fetching_in_pack},
                   {"upload_to_fetch", percentiles_json(o.upload_to_fetch)}};
  if (o.packed) {
    out["pack_start"] = o.pack.begin;
    out["pack_end"] = o.pack.end;
  }
  return out;
}

json::array path_json(const critical_path& p) {
  json::array out;
  for (const auto& l : p.links)
    out.push_back({{"action_type", l.action_type}, {"level", l.level}, {"node", l.node}, {"status", l.status},
                   {"depth", l.depth}, {"begin", l.begin}, {"end", l.end}, {"duration", l.duration()},
                   {"share", l.share}, {"folded", l.folded}});
  return out;
}

json::object job_json(const job_stats& j) {
  json::array nodes;
  for (const auto& n : j.nodes)
    nodes.push_back({{"node", n.node}, {"provisioned_from", n.provisioned.begin}, {"provisioned_to", n.provisioned.end},
                     {"provisioned_seconds", n.provisioned_seconds()}, {"busy_seconds", n.busy_seconds()}});
  return {{"action_type", j.action_type}, {"task_uuid", j.task_uuid}, {"level", j.level}, {"file", j.file},
          {"status", j.status}, {"complete", j.complete}, {"start", j.time.begin}, {"end", j.time.end},
          {"duration", j.time.length()}, {"tasks", j.tasks}, {"failed_tasks", j.failed_tasks},
          {"cancelled_tasks", j.cancelled_tasks},
          {"incomplete_tasks", j.incomplete_tasks}, {"pending", pending_json(j.pending_summary)},
          {"utilisation", usage_json(j.usage)}, {"nodes", std::move(nodes)}, {"critical_path", path_json(j.path)},
          {"fetch_overlap", overlap_json(j.overlap)}};
}

}  // namespace

std::string render_stats(const trace_stats& stats) { return text_report(stats).render(); }

json::value stats_to_json(const trace_stats& s) {
  json::array types;
  for (const auto& t : s.action_types)
    types.push_back({{"action_type", t.action_type}, {"count", t.count}, {"failures", t.failures},
                     {"cancelled", t.cancelled},
                     {"incomplete", t.incomplete}, {"duration", percentiles_json(t.duration)}});
  json::array job_types;
  for (const auto& t : s.job_types)
    job_types.push_back({{"action_type", t.action_type}, {"jobs", t.jobs}, {"failed", t.failed}, {"cancelled", t.cancelled},
                         {"incomplete", t.incomplete}, {"tasks", t.tasks}, {"pending", pending_json(t.pending)},
                         {"utilisation", usage_json(t.usage)}});
  json::array jobs;
  for (const auto& j : s.jobs) jobs.push_back(job_json(j));
  return {{"files", s.files},
          {"messages", s.messages},
          {"eliot_tasks", s.eliot_tasks},
          {"incomplete_eliot_tasks", json::value_from(s.incomplete_eliot_tasks)},
          {"problems", json::value_from(s.problems)},
          {"action_types", std::move(types)},
          {"job_types", std::move(job_types)},
          {"pending", pending_json(s.pending_summary)},
          {"utilisation", usage_json(s.usage)},
          {"jobs", std::move(jobs)}};
}

}  // namespace ferry::tracing
