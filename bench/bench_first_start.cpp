// The very first start (issue 35): fresh local nodes, an empty storage prefix, empty layer caches and a cold
// hash cache, side by side with rsync over ssh in the same run, on three environments, each a workspace beside
// a venv of /usr/bin/python3 (Python 3.11, as the nodes' python3):
//   a  this machine's own site-packages (the interpreter's, without __pycache__ and the sandbox's .pth);
//      `python3 main.py` imports boto3, botocore and yaml;
//   b  Debian's /usr/lib/python3/dist-packages copied in the same way; main.py imports yaml, jinja2,
//      cryptography and dask;
//   c  a synthetic 1.28 GB environment shaped like a CUDA build of PyTorch (bench/make_torch_like_env.py: 600,
//      360 and 240 MB libraries that deflate to half, 8,000 small modules); main.py imports it and reads each
//      library's head, as a dlopen would.
// Node counts: 2 for each, and 4 for c (FERRY_BENCH_NODES=2,4 sets them for all). On each:
//   ferry   `ferry run --nodes N -- python3 main.py`, once per codec of FERRY_BENCH_CODEC (a comma list of
//           deflate, zstd, zstd+dict; default deflate), each a line `codec = "..."` in the project's
//           [packaging] (zstd+dict adds FERRY_BENCH_DICT_LINE too). A build that does not know
//           packaging.codec runs deflate without the line, and says so; a refused zstd is skipped.
//   rsync   `rsync -a` over ssh to every node at once, each into a directory of its own, then the same command.
// From ferry's trace of each run: the pack's rate (MB of input per second of the pack step), each node's
// rate (MB of layers written per second, from its first shard's start to its last shard's end, and over the
// time some shard of it was in flight, which leaves out its waits for the pack), the bytes
// uploaded (the manifest step's uploaded_bytes) and the zipped size of every layer. For a and b, the bytes
// `rsync -az --stats` sends to one node ("Total bytes sent").
// With FERRY_BENCH_UPLINK_MBIT=M the workstation sits behind an uplink of M Mbit/s (the test proxy's rate,
// as bench_cold's uplink mode), the nodes reach storage directly, and ferry races `rsync -az`.
// Goals: first start <= 0.7x rsync -a on a and b; c <= 1.0x on 2 nodes, <= 0.6x on 4; behind the uplink,
// 2 nodes, <= 0.5x rsync -az; ferry's bytes uploaded for a <= rsync -az's to one node.
// What the nodes write, ferry's node caches and rsync's copies alike, and the environments are on a fresh
// ext4 of the bench's own, as a new node's disk is (bench_world.hpp says why; FERRY_BENCH_FRESH_FS=0 keeps
// them on /tmp as it is).
// FERRY_BENCH_ENVS=a,b,c selects environments, FERRY_BENCH_ROUNDS (default 1) the rounds (the best is
// shown), FERRY_BENCH_KEEP_TRACES=DIR keeps every ferry trace (and its nodes') there.
#include "bench/bench_peers.hpp"
#include "bench/bench_support.hpp"
#include "bench/bench_world.hpp"
#include "tracing/action_types.hpp"
#include "tracing/task_tree.hpp"
#include "tracing/trace_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace at = ferry::action_types;
namespace json = boost::json;
using ferry::bench::first_line;
using ferry::bench::node_address;
using ferry::bench::output_of;
using ferry::bench::quote;
using ferry::bench::shell;
using ferry::bench::site_packages_of;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double mb(double bytes) { return bytes / 1e6; }

struct world : ferry::bench::node_world {
  std::string ssh;
  ferry::bench::uplink link;
  std::string node_endpoint;
  int prefix = 0;
  int trace_count = 0;
  fs::path keep_traces;

  explicit world(std::string binary) : node_world("first", std::move(binary), env_or("FERRY_BENCH_FRESH_FS", "1") != "0") {
    ssh = ferry::bench::ssh_with_key(dir / "XDG_CONFIG_HOME");
    keep_traces = env_or("FERRY_BENCH_KEEP_TRACES", "");
    if (!keep_traces.empty()) fs::create_directories(keep_traces);
  }
  void fresh_storage() { ::setenv("FERRY_STORAGE_URL", fmt::format("s3://bench/first{}", ++prefix).c_str(), 1); }
};

// One environment: its workspace (with .venv) and the import line of its main.py.
struct environment {
  std::string key;
  std::string title;
  fs::path project;
  std::vector<int> node_counts;
};


// What the peers copy and ferry ships alike: no __pycache__, no .pyc.
const char* excludes = "--exclude __pycache__ --exclude '*.pyc'";

// The sandbox's own .pth (and its CA) is this machine's set-up, not a package.
const char* sandbox = "--exclude '_sandboxing*'";

environment make_environment(world& w, const std::string& key) {
  environment e{key, "", w.dir / ("env-" + key), {2}};
  fs::create_directories(e.project / "app");
  std::ofstream(e.project / "app" / "__init__.py") << "VALUE = 1\n";
  shell(fmt::format("/usr/bin/python3 -m venv --without-pip {}", quote(e.project / ".venv")));
  const auto site = site_packages_of(quote(e.project / ".venv" / "bin" / "python"));
  std::string main;
  if (key == "a") {
    e.title = "this machine's site-packages";
    shell(fmt::format("rsync -a {} {} {}/ {}/", excludes, sandbox, quote(site_packages_of("python3")), quote(site)));
    main = "import app, boto3, botocore, yaml\nprint(app.VALUE, boto3.__version__)\n";
  } else if (key == "b") {
    e.title = "Debian's /usr/lib/python3/dist-packages";
    shell(fmt::format("rsync -a {} {} /usr/lib/python3/dist-packages/ {}/", excludes, sandbox, quote(site)));
    main = "import app, yaml, jinja2, cryptography.fernet, dask\nprint(app.VALUE, yaml.__version__)\n";
  } else if (key == "c") {
    e.title = "a synthetic torch-like environment (bench/make_torch_like_env.py)";
    e.node_counts = {2, 4};
    const auto script = fs::path(__FILE__).parent_path() / "make_torch_like_env.py";
    fmt::print("{}", output_of(fmt::format("/usr/bin/python3 {} {}", quote(script), quote(site))));
    main =
        "import app, os, torchlike\n"
        "lib = os.path.join(os.path.dirname(torchlike.__file__), 'lib')\n"
        "for name in sorted(os.listdir(lib)):\n"
        "    with open(os.path.join(lib, name), 'rb') as f:\n"
        "        f.read(65536)\n"
        "print(app.VALUE, torchlike.__version__)\n";
  } else {
    throw std::runtime_error("FERRY_BENCH_ENVS: unknown environment '" + key + "' (a, b or c)");
  }
  std::ofstream(e.project / "main.py") << main;
  if (const char* n = std::getenv("FERRY_BENCH_NODES"); n && *n) {
    e.node_counts.clear();
    for (const auto& c : split(n)) e.node_counts.push_back(std::stoi(c));
  }
  return e;
}

std::string in_project(const environment& e, const std::string& command) {
  return fmt::format("cd {} && {}", quote(e.project), command);
}

// A codec as the bench runs it: the lines it adds to [packaging], or none on a build that predates them.
struct codec {
  std::string name;
  std::string lines;
};

// The codecs of FERRY_BENCH_CODEC that this ferry accepts in a project's ferry.toml.
std::vector<codec> codecs_accepted(world& w, const environment& e) {
  std::vector<codec> out;
  for (const auto& name : split(env_or("FERRY_BENCH_CODEC", "deflate"))) {
    codec c{name, ""};
    if (name == "deflate" || name == "zstd") {
      c.lines = fmt::format("codec = \"{}\"\n", name);
    } else if (name == "zstd+dict") {
      const auto dict = env_or("FERRY_BENCH_DICT_LINE", "");
      if (dict.empty()) {
        fmt::print("zstd+dict: skipped, FERRY_BENCH_DICT_LINE (the [packaging] line that turns the dictionary on) is unset\n");
        continue;
      }
      c.lines = "codec = \"zstd\"\n" + dict + "\n";
    } else {
      throw std::runtime_error("FERRY_BENCH_CODEC: unknown codec '" + name + "' (deflate, zstd or zstd+dict)");
    }
    std::ofstream(e.project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n" << c.lines;
    const bool known =
        std::system(in_project(e, fmt::format("{} config show > /dev/null 2>&1", quote(w.ferry))).c_str()) == 0;
    if (known) {
      out.push_back(c);
    } else if (name == "deflate") {
      fmt::print("deflate: this ferry does not know packaging.codec; deflate, its only codec, without the line\n");
      out.push_back({name, ""});
    } else {
      fmt::print("{}: skipped, this ferry refuses the lines:\n{}", name, c.lines);
    }
  }
  return out;
}

void use_codec(const environment& e, const codec& c) {
  std::ofstream(e.project / "ferry.toml") << "[packaging]\npython = \".venv/bin/python\"\n" << c.lines;
}

// What one first start's trace says.
struct trace_figures {
  double pack_seconds = 0;
  double input_bytes = 0;       // the walk's bytes: the environment as ferry packs it
  double uploaded_bytes = 0;    // the manifest step's uploaded_bytes
  std::map<std::string, std::pair<double, double>> layers;  // name -> (bytes, zipped bytes), summed over shards
  std::vector<double> node_rates;  // MB written per second, one per node: from its first shard to its last
  std::vector<double> node_busy_rates;  // the same over the time some shard of it was in flight (no waits)
  double pack_rate() const { return pack_seconds > 0 ? mb(input_bytes) / pack_seconds : 0; }
};

double number(const json::value* v) { return v && v->is_number() ? v->to_number<double>() : 0; }
std::string text(const json::value* v) { return v && v->is_string() ? std::string(v->as_string()) : std::string(); }

template <class F>
void each_action(const ferry::tracing::tree_node& n, F&& f) {
  if (n.is_action() && n.start) f(n);
  for (const auto& [_, child] : n.children) each_action(*child, f);
}

trace_figures read_figures(const fs::path& trace) {
  ferry::diagnostics diag;
  auto set = ferry::tracing::read_traces({trace}, diag);
  if (!set) throw std::runtime_error("cannot read the trace " + trace.string() + ": " + diag.message);
  const auto trees = ferry::tracing::build_task_trees(*set);
  trace_figures t;
  struct node_span {
    double first = 1e300, last = 0;
    std::vector<std::pair<double, double>> shards;  // each shard's start and end
    std::vector<std::string> layers;  // fetched
  };
  std::map<std::size_t, node_span> nodes;  // by trace file: one per node program
  for (const auto& tree : trees) {
    each_action(*tree.root, [&](const ferry::tracing::tree_node& a) {
      const auto type = a.type();
      if (type == at::packaging::pack) {
        t.pack_seconds = std::max(t.pack_seconds, a.duration().value_or(0));
      } else if (type == at::packaging::walk) {
        t.input_bytes = std::max(t.input_bytes, number(a.field("bytes")));
      } else if (type == at::packaging::manifest) {
        t.uploaded_bytes = std::max(t.uploaded_bytes, number(a.field("uploaded_bytes")));
      } else if (type == at::packaging::upload) {
        auto& l = t.layers[text(a.field("layer"))];
        l.first += number(a.field("bytes"));
        l.second += number(a.field("zip_bytes"));
      } else if (type == at::node::shard && a.start_time() && a.end_time()) {
        auto& s = nodes[a.start->file];
        s.first = std::min(s.first, *a.start_time());
        s.last = std::max(s.last, *a.end_time());
        s.shards.emplace_back(*a.start_time(), *a.end_time());
      } else if (const auto* cached = a.field("cached"); type == at::node::layer && cached && cached->is_bool() &&
                                                           !cached->as_bool()) {
        nodes[a.start->file].layers.push_back(text(a.field("name")));
      }
    });
  }
  for (const auto& [_, s] : nodes) {
    double written = 0;
    for (const auto& name : s.layers)
      if (auto it = t.layers.find(name); it != t.layers.end()) written += it->second.first;
    if (s.last > s.first) t.node_rates.push_back(mb(written) / (s.last - s.first));
    auto shards = s.shards;
    std::sort(shards.begin(), shards.end());
    double busy = 0, end = -1e300;
    for (const auto& [b, e] : shards) {
      if (e <= end) continue;
      busy += e - std::max(b, end);
      end = e;
    }
    if (busy > 0) t.node_busy_rates.push_back(mb(written) / busy);
  }
  return t;
}

struct ferry_result {
  double seconds = 1e9;
  std::string line;
  trace_figures figures;
};

ferry_result ferry_first_start(world& w, const environment& e, const codec& c, int nodes) {
  ferry::bench::fresh_local_nodes(w.ferry, nodes);
  w.fresh_storage();
  ferry::bench::cold_hash_cache(w.dir);
  use_codec(e, c);
  const auto trace = w.dir / fmt::format("run-{}.jsonl", ++w.trace_count);
  ferry_result r;
  std::string err;
  r.seconds = ferry::bench::seconds_of([&] {
    err = output_of(in_project(e, fmt::format("{} --trace {} run --nodes {} -- python3 main.py 2>&1 >/dev/null",
                                              quote(w.ferry), quote(trace), nodes)));
  });
  r.line = first_line(err.substr(err.rfind("ready in")));
  r.figures = read_figures(trace);
  if (!w.keep_traces.empty()) {
    const auto name = fmt::format("{}-{}-{}nodes{}-{}-{}", e.key, c.name, nodes, w.link.rate > 0 ? "-uplink" : "",
                                  ::getpid(), w.trace_count);
    for (const auto& f : fs::directory_iterator(w.dir)) {
      const auto file = f.path().filename().string();
      if (file.starts_with(trace.stem().string() + ".") || file == trace.filename().string())
        fs::copy_file(f.path(), w.keep_traces / (name + file.substr(trace.stem().string().size())),
                      fs::copy_options::overwrite_existing);
    }
  }
  return r;
}


double rsync_first_start(const world& w, const environment& e, const std::vector<node_address>& nodes,
                         const std::string& flags) {
  const auto dir = (w.dir / "rsync").string();  // each node's copy on the world's filesystem, as ferry's
  const auto s = ferry::bench::rsync_to_all(w.ssh, nodes, e.project, dir, fmt::format("{} {}", flags, excludes),
                                            [&](const node_address& n, const std::string& d) { return ferry::bench::python_main_in(w.ssh, n, d); });
  shell(fmt::format("rm -rf {}-*", dir));
  return s;
}

// "Total bytes sent: 61,234,567" of `rsync -az --stats` to one node (a fresh directory).
double rsync_az_bytes(const world& w, const environment& e, const node_address& n) {
  const auto dir = (w.dir / "rsync-stats").string();
  const auto out = output_of(fmt::format("rsync -az --stats {} -e \"{} -p {}\" {}/ root@{}:{}/", excludes, w.ssh, n.port,
                                         quote(e.project), n.host, dir));
  shell(fmt::format("rm -rf {}", dir));
  const auto at = out.find("Total bytes sent: ");
  if (at == std::string::npos) throw std::runtime_error("no 'Total bytes sent' in rsync's --stats:\n" + out);
  std::string digits;
  for (char ch : out.substr(at + 18, out.find('\n', at) - at - 18))
    if (ch >= '0' && ch <= '9') digits.push_back(ch);
  return std::stod(digits);
}

std::string goal_of(const environment& e, int nodes, bool uplink) {
  if (uplink) return nodes == 2 ? "goal <= 0.5x" : "no goal";
  if (e.key == "c") return nodes == 2 ? "goal <= 1.0x" : (nodes == 4 ? "goal <= 0.6x" : "no goal");
  return "goal <= 0.7x";
}

std::string rates(const trace_figures& t) {
  auto list = [](const std::vector<double>& rates) {
    std::string out;
    for (double r : rates) out += fmt::format("{}{:.0f}", out.empty() ? "" : ", ", r);
    return out;
  };
  return fmt::format("pack {:.0f} MB/s of {:.0f} MB in; nodes {} MB/s written (first shard to last), {} while fetching",
                     t.pack_rate(), mb(t.input_bytes), list(t.node_rates), list(t.node_busy_rates));
}

// Every layer for c, else the totals and the largest 10 (by bytes): its bytes and zipped bytes per codec.
void print_layers(const environment& e, const std::vector<codec>& codecs, const std::map<std::string, trace_figures>& by_codec) {
  std::map<std::string, double> bytes;
  for (const auto& [_, t] : by_codec)
    for (const auto& [name, l] : t.layers) bytes[name] = l.first;
  std::vector<std::pair<std::string, double>> order(bytes.begin(), bytes.end());
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::string head = fmt::format("    {:<36} {:>10}", "layer", "MB");
  for (const auto& c : codecs) head += fmt::format(" {:>10} {:>6}", c.name + " MB", "ratio");
  fmt::print("  layer sizes ({} layers{})\n{}\n", order.size(), e.key == "c" ? "" : "; the largest 10", head);
  auto row = [&](const std::string& name, double b, auto zipped_of) {
    std::string line = fmt::format("    {:<36} {:>10.1f}", name.substr(0, 36), mb(b));
    for (const auto& c : codecs) {
      const double z = zipped_of(by_codec.at(c.name));
      line += fmt::format(" {:>10.1f} {:>6.3f}", mb(z), b > 0 ? z / b : 0);
    }
    fmt::print("{}\n", line);
  };
  for (std::size_t i = 0; i < order.size() && (e.key == "c" || i < 10); ++i) {
    const auto& name = order[i].first;
    row(name, order[i].second, [&](const trace_figures& t) {
      const auto it = t.layers.find(name);
      return it == t.layers.end() ? 0.0 : it->second.second;
    });
  }
  double total = 0;
  for (const auto& [_, b] : order) total += b;
  row("total", total, [](const trace_figures& t) {
    double z = 0;
    for (const auto& [_, l] : t.layers) z += l.second;
    return z;
  });
}

void run_environment(world& w, environment& e, int rounds, double mbit) {
  const auto codecs = codecs_accepted(w, e);
  const auto size = first_line(output_of(in_project(e, "du -s --apparent-size -B1MB --exclude __pycache__ . | cut -f1")));
  const auto files = first_line(output_of(in_project(e, "find . -type f -not -path '*/__pycache__/*' | wc -l")));
  fmt::print("\n({}) {}: workspace + venv, {} MB in {} files; load before: {}", e.key, e.title, size, files,
             output_of("uptime"));
  const bool uplink = w.link.rate > 0;
  const std::string peer = uplink ? "-az" : "-a";
  std::map<std::string, trace_figures> first_figures;  // by codec: the layers of the first 2-node run
  for (int nodes : e.node_counts) {
    std::map<std::string, ferry_result> best;
    double rsync = 1e9;
    for (int r = 0; r < rounds; ++r) {
      for (const auto& c : codecs) {
        auto got = ferry_first_start(w, e, c, nodes);
        if (!first_figures.count(c.name)) first_figures[c.name] = got.figures;
        if (got.seconds < best[c.name].seconds) best[c.name] = std::move(got);
      }
      auto addresses = ferry::bench::fresh_local_nodes(w.ferry, nodes);
      if (uplink) addresses = w.link.through(addresses);
      rsync = std::min(rsync, rsync_first_start(w, e, addresses, peer));
    }
    fmt::print("  {} fresh nodes{}, best of {} round{}\n", nodes,
               uplink ? fmt::format(", the workstation behind a {} Mbit/s uplink", mbit) : "", rounds,
               rounds == 1 ? "" : "s");
    for (const auto& c : codecs) {
      const auto& b = best[c.name];
      fmt::print("    ferry {:<10} {:7.2f} s   ferry/rsync {} {:.2f}x ({})\n", c.name, b.seconds, peer,
                 b.seconds / rsync, goal_of(e, nodes, uplink));
      fmt::print("      {}\n      {}\n", rates(b.figures), b.line);
    }
    fmt::print("    rsync {:<10} {:7.2f} s\n", peer, rsync);
  }
  if (!uplink && e.key != "c") {
    const auto node = ferry::bench::fresh_local_nodes(w.ferry, 1).front();
    const double sent = rsync_az_bytes(w, e, node);
    fmt::print("  bytes: rsync -az --stats to one node sent {:.1f} MB\n", mb(sent));
    for (const auto& c : codecs) {
      const double up = first_figures[c.name].uploaded_bytes;
      fmt::print("    ferry {:<10} uploaded {:.1f} MB   ferry/rsync -az {:.2f}x (goal <= 1.0x)\n", c.name, mb(up),
                 up / sent);
    }
  }
  if (!codecs.empty()) print_layers(e, codecs, first_figures);
}

int run(world& w) {
  const auto keys = split(env_or("FERRY_BENCH_ENVS", "a,b,c"));
  std::vector<environment> envs;
  for (const auto& k : keys) envs.push_back(make_environment(w, k));
  ferry::bench::fresh_local_nodes(w.ferry, 1);  // the first node makes the bridge moto listens on
  w.start_moto();
  const int rounds = std::atoi(env_or("FERRY_BENCH_ROUNDS", "1").c_str());
  const double mbit = std::atof(env_or("FERRY_BENCH_UPLINK_MBIT", "0").c_str());
  w.link.rate = static_cast<std::uint64_t>(mbit * 1e6 / 8);
  w.node_endpoint = ferry::bench::storage_behind_uplink(w.link, w.endpoint);
  fmt::print("first-ever start: fresh local nodes, an empty storage prefix, empty layer caches, a cold hash cache\n");
  for (auto& e : envs) run_environment(w, e, rounds, mbit);
  return 0;
}

}  // namespace

int main() { return ferry::bench::bench_main<world>("bench_first_start", run); }
