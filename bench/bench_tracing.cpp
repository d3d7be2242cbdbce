// The trace sink's cost: messages per second into a real file, and the time an action's open and close
// add to the code they wrap. Everything runs pinned to one core, the writer thread included, so the
// numbers are what tracing costs a busy machine. Python's eliot writing the same messages to a file is
// the peer, run in the same process tree.
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

using namespace ferry;
using clock_type = std::chrono::steady_clock;

namespace {

// The benchmark's own names, the same for ferry's sink and for eliot, its peer.
constexpr std::string_view messages_root = "bench:messages";
constexpr std::string_view message_type = "bench:tick";
constexpr std::string_view actions_root = "bench:actions";
constexpr std::string_view step_type = "bench:step";

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

void pin_to_one_core() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);
}

std::unique_ptr<tracing::sink> open_sink(const std::filesystem::path& path) {
  diagnostics diag;
  auto s = tracing::sink::open(path, diag);
  if (!s) throw std::runtime_error(diag.message);
  return std::move(*s);
}

// Messages per second, from the first message to the last byte written (flush included).
double messages_per_second(const std::filesystem::path& path, int count) {
  std::filesystem::remove(path);
  auto out = open_sink(path);
  auto root = tracing::action::start_task(*out, messages_root);
  const auto start = clock_type::now();
  for (int i = 0; i < count; ++i) root.log(message_type, {{"i", i}, {"layer", "numpy"}});
  root.succeed();
  out->flush();
  return count / seconds_since(start);
}

// Nanoseconds an open and close of a child action add, measured around the pair itself.
double action_pair_ns(const std::filesystem::path& path, int count) {
  std::filesystem::remove(path);
  auto out = open_sink(path);
  auto root = tracing::action::start_task(*out, actions_root);
  const auto start = clock_type::now();
  for (int i = 0; i < count; ++i) {
    auto step = root.child(step_type, {{"i", i}});
    step.succeed({{"bytes", 4096}});
  }
  const double ns = seconds_since(start) * 1e9 / count;
  root.succeed();
  return ns;
}

double eliot_messages_per_second(const std::filesystem::path& path, int count) {
  const auto script = fmt::format(
      "import time\n"
      "from eliot import start_action, log_message, to_file\n"
      "to_file(open('{}', 'w'))\n"
      "with start_action(action_type='{}'):\n"
      "    t = time.perf_counter()\n"
      "    for i in range({}): log_message(message_type='{}', i=i, layer='numpy')\n"
      "    print({} / (time.perf_counter() - t))\n",
      path.string(), messages_root, count, message_type, count);
  const auto cmd = fmt::format("/usr/bin/python3 -c \"{}\"", script);
  FILE* p = ::popen(cmd.c_str(), "r");
  double rate = 0;
  if (p && std::fscanf(p, "%lf", &rate) != 1) rate = 0;
  if (p) ::pclose(p);
  return rate;
}

}  // namespace

int main() {
  pin_to_one_core();
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("ferry-bench-tracing-{}", ::getpid());
  std::filesystem::create_directories(dir);
  constexpr int messages = 2'000'000;
  constexpr int actions = 1'000'000;
  constexpr int eliot_messages = 200'000;

  messages_per_second(dir / "warmup.jsonl", 100'000);
  const double ours = messages_per_second(dir / "messages.jsonl", messages);
  const double pair_ns = action_pair_ns(dir / "actions.jsonl", actions);
  const double theirs = eliot_messages_per_second(dir / "eliot.jsonl", eliot_messages);
  std::filesystem::remove_all(dir);

  fmt::print("sink, one core, {} messages to a file: {:.2f} M messages/s (goal >= 1.00)\n", messages, ours / 1e6);
  fmt::print("action open+close, {} pairs: {:.2f} us per pair (goal < 2 us)\n", actions, pair_ns / 1e3);
  if (theirs > 0)
    fmt::print("python3-eliot, {} messages to a file: {:.3f} M messages/s; ferry/eliot = {:.1f}x\n", eliot_messages,
               theirs / 1e6, ours / theirs);
  return 0;
}
