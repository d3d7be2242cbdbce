// Discovery of sys.path: classification of scripted answers (no Python), parsing the probe's output, the
// real interpreters of this machine (the pyenv shim on PATH, /usr/bin/python3, a venv), the probe's
// failures with fake interpreters (shell scripts), and the on-disk cache of answers.
#include "net/cancellation.hpp"
#include "packaging/discovery.hpp"
#include "packaging/discovery_cache.hpp"
#include "packaging/error.hpp"
#include "packaging/python_probe.hpp"

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace ferry::packaging {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using kind = discovery_entry::kind;
using test::dead_or_zombie;
using test::read_pid;
using test::temp_dir;

// ---- helpers ---------------------------------------------------------------------------------------------

fs::path real(const fs::path& p) { return fs::weakly_canonical(p); }

const discovery_entry* find_entry(const discovery& d, const fs::path& p) {
  const auto wanted = real(p);
  for (const auto& e : d.entries)
    if (e.real_path == wanted) return &e;
  return nullptr;
}

std::string kind_of(const discovery& d, const fs::path& p) {
  const auto* e = find_entry(d, p);
  return e ? std::string(to_string(e->what)) : "absent";
}

std::vector<std::string> kinds(const discovery& d) {
  std::vector<std::string> out;
  for (const auto& e : d.entries) out.emplace_back(to_string(e.what));
  return out;
}

// The process environment with some variables replaced (nullopt: unset).
config::env_lookup env_with(std::map<std::string, std::optional<std::string>> changes) {
  return [changes = std::move(changes), base = config::process_env()](std::string_view name) {
    if (const auto it = changes.find(std::string(name)); it != changes.end()) return it->second;
    return base(name);
  };
}

// An executable shell script standing in for an interpreter.
fs::path write_script(const temp_dir& dir, std::string_view name, std::string_view body) {
  const auto path = dir.write(name, fmt::format("#!/bin/sh\n{}\n", body));
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
  return path;
}

// Sets the mtime an hour back, so that the cache does not take the file for one that changed while the
// probe ran (see racy() in discovery_cache.hpp).
void backdate(const fs::path& p, std::chrono::seconds by = 3600s) {
  const auto when = std::chrono::system_clock::now() - by;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  const timespec times[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(ns / 1'000'000'000), ns % 1'000'000'000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << p;
}

std::string python_version(const std::string& python, const fs::path& cwd) {
  const auto r = test::run({python, "-c", "import sys; print('%d.%d.%d' % tuple(sys.version_info[:3]))"},
                           {.cwd = cwd});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto out = r.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string text_of(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

// The end messages of `action_type` in a trace, in order.
std::vector<json::object> ends_of(const std::string& text, std::string_view action_type) {
  std::vector<json::object> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    error_code ec;
    auto v = json::parse(line, ec);
    const auto* o = ec ? nullptr : v.if_object();
    if (!o || !o->contains("action_status")) continue;
    if (text_of(*o, "action_type") == action_type && text_of(*o, "action_status") != "started") out.push_back(*o);
  }
  return out;
}

// Runs coroutines to their end on a fresh io_context, under a root action traced to a file.
class with_io : public ::testing::Test {
 protected:
  result<probe_answer> probe(probe_request request) {
    return run(probing(std::move(request)));
  }
  result<discovery> discover_now(discover_options opts) { return run(discovering(std::move(opts))); }

  asio::awaitable<result<probe_answer>> probing(probe_request request) {
    co_await net::accept_cancellation();
    co_return co_await run_probe(trace.root(), request, diag);
  }
  asio::awaitable<result<discovery>> discovering(discover_options opts) {
    co_await net::accept_cancellation();
    co_return co_await discover(trace.root(), opts, diag);
  }

  template <class T>
  T run(asio::awaitable<T> task) {
    diag.clear();
    asio::io_context io;
    auto done = asio::co_spawn(io, std::move(task), asio::use_future);
    io.run();
    return done.get();
  }

  temp_dir dir;
  test::trace_root trace{dir / "trace.jsonl", "test:discovery"};
  diagnostics diag;
};

// ---- classification of scripted answers ----------------------------------------------------------------

// A scripted layout under a temp dir: an installation in base/, a project in ws/.
class discovery_classify : public ::testing::Test {
 protected:
  discovery_classify() {
    fs::create_directories(ws);
    fs::create_directories(base / "lib/python3.11/lib-dynload");
    answer.base_prefix = answer.prefix = base.string();
    answer.stdlib = answer.platstdlib = (base / "lib/python3.11").string();
    answer.version = "3.11.7";
    answer.platform_tag = "cp311-linux_x86_64";
    answer.cache_tag = "cpython-311";
    answer.executable = (base / "bin/python3").string();
    answer.cwd = ws.string();
  }

  // The interpreter's own entries, as CPython lists them after "".
  std::vector<std::string> stdlib_entries() const {
    return {(base / "lib/python311.zip").string(), (base / "lib/python3.11").string(),
            (base / "lib/python3.11/lib-dynload").string()};
  }

  discovery classified(bool ship_site_packages = true) {
    diagnostics diag;
    auto d = classify(answer, ws, ship_site_packages, diag);
    EXPECT_TRUE(d) << diag.message;
    return d ? *d : discovery{};
  }

  fs::path mkdir(std::string_view name) {
    fs::create_directories(dir / name);
    return dir / name;
  }

  temp_dir dir;
  fs::path ws = dir / "ws";
  fs::path base = dir / "base";
  probe_answer answer;
};

TEST_F(discovery_classify, a_venv_ships_its_site_packages_but_not_the_base_stdlib) {
  const auto venv = dir / "ws/.venv";
  const auto site = mkdir("ws/.venv/lib/python3.11/site-packages");
  answer.prefix = venv.string();
  answer.executable = (venv / "bin/python").string();
  answer.site_packages = {site.string()};
  answer.purelib = answer.platlib = site.string();
  answer.sys_path = {""};
  for (const auto& e : stdlib_entries()) answer.sys_path.push_back(e);
  answer.sys_path.push_back(site.string());

  const auto d = classified();
  EXPECT_EQ(kinds(d), (std::vector<std::string>{"workspace", "stdlib", "stdlib", "stdlib", "site_packages"}));
  EXPECT_EQ(d.entries[0].real_path, real(ws));
  const auto shipped = d.shipped();
  ASSERT_EQ(shipped.size(), 2u);
  EXPECT_EQ(shipped[1]->real_path, real(site));
  EXPECT_FALSE(shipped[1]->inside_workspace);  // a site dir, even one inside the project
  EXPECT_EQ(d.version, "3.11.7");
  EXPECT_EQ(d.platform_tag, "cp311-linux_x86_64");
  EXPECT_EQ(d.executable, venv / "bin/python");
}

TEST_F(discovery_classify, debian_dist_packages_are_site_packages_even_below_the_stdlib) {
  const auto local = mkdir("base/local/lib/python3.11/dist-packages");
  const auto shared = mkdir("base/lib/python3/dist-packages");
  const auto versioned = mkdir("base/lib/python3.11/dist-packages");  // inside the stdlib directory
  answer.site_packages = {local.string(), shared.string(), versioned.string()};
  answer.purelib = answer.platlib = local.string();
  answer.sys_path = {""};
  for (const auto& e : stdlib_entries()) answer.sys_path.push_back(e);
  for (const auto& p : {local, shared, versioned}) answer.sys_path.push_back(p.string());

  const auto d = classified();
  EXPECT_EQ(kinds(d), (std::vector<std::string>{"workspace", "stdlib", "stdlib", "stdlib", "site_packages",
                                                 "site_packages", "site_packages"}));
  EXPECT_EQ(kind_of(d, base / "lib/python311.zip"), "stdlib");  // absent, yet the interpreter's own
}

TEST_F(discovery_classify, user_site_is_site_packages_and_is_skipped_when_not_shipping_them) {
  const auto user = mkdir("home/.local/lib/python3.11/site-packages");
  const auto site = mkdir("base/lib/python3.11/site-packages");
  answer.site_packages = {site.string()};
  answer.purelib = answer.platlib = site.string();
  answer.user_site = user.string();
  answer.sys_path = {"", (base / "lib/python3.11").string(), user.string(), site.string()};

  const auto shipping = classified(true);
  EXPECT_EQ(kind_of(shipping, user), "site_packages");
  EXPECT_EQ(kind_of(shipping, site), "site_packages");
  EXPECT_EQ(shipping.shipped().size(), 3u);

  const auto skipping = classified(false);
  EXPECT_EQ(kind_of(skipping, user), "skipped_site_packages");
  EXPECT_EQ(kind_of(skipping, site), "skipped_site_packages");
  ASSERT_EQ(skipping.shipped().size(), 1u);
  EXPECT_EQ(skipping.shipped()[0]->what, kind::workspace);
}

TEST_F(discovery_classify, duplicates_through_symlinks_keep_the_first) {
  const auto extra = mkdir("extra");
  fs::create_directory_symlink(extra, dir / "extra-link");
  fs::create_directory_symlink(ws, dir / "ws-link");
  answer.sys_path = {"", (dir / "extra-link").string(), extra.string(), ws.string(), (dir / "ws-link").string(),
                     "", (dir / "extra/").string()};

  const auto d = classified();
  EXPECT_EQ(kinds(d), (std::vector<std::string>{"workspace", "other"}));
  EXPECT_EQ(d.entries[1].path, dir / "extra-link");  // as sys.path named it first
  EXPECT_EQ(d.entries[1].real_path, real(extra));
}

TEST_F(discovery_classify, missing_entries_zip_files_and_relative_entries) {
  const auto egg = dir.write("eggs/thing-1.0-py3.11.egg", "PK");
  mkdir("ws/src");
  answer.sys_path = {"", (dir / "nope").string(), egg.string(), "src", (base / "lib/python3.11").string()};

  const auto d = classified();
  EXPECT_EQ(kinds(d), (std::vector<std::string>{"workspace", "missing", "zip_file", "other", "stdlib"}));
  const auto* src = find_entry(d, ws / "src");
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->path, ws / "src");  // relative to the workspace the probe ran in
  EXPECT_TRUE(src->inside_workspace);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("inside the workspace"), std::string::npos) << d.notes[0];
  const auto shipped = d.shipped();
  ASSERT_EQ(shipped.size(), 3u);
  EXPECT_EQ(shipped[1]->what, kind::zip_file);
  EXPECT_EQ(shipped[2]->what, kind::other);
}

TEST_F(discovery_classify, the_workspace_comes_first_even_when_python_leaves_it_out) {
  const auto extra = mkdir("extra");
  answer.sys_path = {extra.string(), (base / "lib/python3.11").string()};  // PYTHONSAFEPATH: no ""
  const auto d = classified();
  EXPECT_EQ(kinds(d), (std::vector<std::string>{"workspace", "other", "stdlib"}));
  EXPECT_EQ(d.entries[0].path, ws);
}

TEST_F(discovery_classify, a_workspace_that_is_not_a_directory_fails) {
  answer.sys_path = {""};
  diagnostics diag;
  const auto file = dir.write("plain-file", "x");
  const auto d = classify(answer, file, true, diag);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error(), make_error_code(errc::not_a_directory));
  EXPECT_NE(diag.message.find("plain-file"), std::string::npos) << diag.message;
}

// ---- the probe's output ------------------------------------------------------------------------------------

probe_answer sample_answer() {
  probe_answer a;
  a.sys_path = {"", "/usr/lib/python311.zip", "/usr/lib/python3.11"};
  a.executable = "/usr/bin/python3";
  a.prefix = a.base_prefix = "/usr";
  a.cwd = "/w";
  a.version = "3.11.2";
  a.cache_tag = "cpython-311";
  a.platform_tag = "cp311-linux_x86_64";
  a.site_packages = {"/usr/lib/python3/dist-packages"};
  a.user_site = "/root/.local/lib/python3.11/site-packages";
  a.stdlib = a.platstdlib = "/usr/lib/python3.11";
  a.purelib = a.platlib = "/usr/local/lib/python3.11/dist-packages";
  return a;
}

std::string marked(const json::value& v) { return "FERRY-PROBE-1 " + json::serialize(v) + "\n"; }

TEST(discovery_parse, answer_round_trips_and_output_before_the_marker_is_ignored) {
  auto a = sample_answer();
  a.sys_path.push_back("/srv/caf\xe9-latin1");  // a path that is not UTF-8 stays the same bytes
  diagnostics diag;
  const auto parsed = parse_probe_output("hello from sitecustomize\n" + marked(to_json(a)), diag);
  ASSERT_TRUE(parsed) << diag.message;
  EXPECT_EQ(*parsed, a);
  a.user_site.reset();
  const auto without_user_site = parse_probe_output(marked(to_json(a)), diag);
  ASSERT_TRUE(without_user_site) << diag.message;
  EXPECT_FALSE(without_user_site->user_site);
}

TEST(discovery_parse, garbage_missing_fields_and_wrong_types_are_bad_output) {
  diagnostics diag;
  auto bad = [&](const std::string& out) {
    diag.clear();
    const auto r = parse_probe_output(out, diag);
    EXPECT_FALSE(r) << out;
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::bad_probe_output));
    }
    EXPECT_FALSE(diag.empty());
    return diag.message;
  };
  EXPECT_NE(bad("Python 2.7 says hi\n").find("Python 2.7 says hi"), std::string::npos);
  bad("FERRY-PROBE-1 {not json\n");
  bad("FERRY-PROBE-1 [1, 2]\n");
  auto o = to_json(sample_answer());
  o.erase("version");
  EXPECT_NE(bad(marked(o)).find("'version'"), std::string::npos);
  o = to_json(sample_answer());
  o["path"] = json::array{1, 2};
  EXPECT_NE(bad(marked(o)).find("'path'"), std::string::npos);
}

// ---- real interpreters ---------------------------------------------------------------------------------

class discovery_probe : public with_io {
 protected:
  // Probes and classifies; the answer is kept for comparisons.
  discovery probe_and_classify(probe_request request, bool ship_site_packages = true) {
    auto got = probe(request);
    EXPECT_TRUE(got) << diag.message;
    if (!got) return {};
    answer = *got;
    auto d = classify(answer, request.working_dir, ship_site_packages, diag);
    EXPECT_TRUE(d) << diag.message;
    return d ? *d : discovery{};
  }

  fs::path ws() {
    fs::create_directories(dir / "ws");
    return dir / "ws";
  }

  probe_answer answer;
};

TEST_F(discovery_probe, python3_on_path_through_the_pyenv_shim) {
  const auto d = probe_and_classify({.python = "python3", .working_dir = ws()});
  ASSERT_FALSE(d.entries.empty());
  EXPECT_EQ(d.entries[0].what, kind::workspace);
  EXPECT_EQ(d.entries[0].real_path, real(ws()));
  EXPECT_EQ(std::count_if(d.entries.begin(), d.entries.end(), [](auto& e) { return e.what == kind::workspace; }), 1);
  EXPECT_EQ(kind_of(d, answer.purelib), "site_packages");
  EXPECT_EQ(kind_of(d, answer.stdlib), "stdlib");
  EXPECT_EQ(kind_of(d, fs::path(answer.platstdlib) / "lib-dynload"), "stdlib");
  EXPECT_EQ(d.version, python_version("python3", ws()));
  EXPECT_EQ(d.platform_tag.substr(0, 2), "cp");
  EXPECT_TRUE(fs::path(answer.executable).is_absolute()) << answer.executable;
}

TEST_F(discovery_probe, system_python_with_debian_dist_packages) {
  const auto d = probe_and_classify({.python = test::system_python, .working_dir = ws()});
  EXPECT_EQ(kind_of(d, "/usr/lib/python3/dist-packages"), "site_packages");
  EXPECT_EQ(kind_of(d, answer.stdlib), "stdlib");
  EXPECT_EQ(d.entries.at(0).what, kind::workspace);
  EXPECT_EQ(d.version, python_version(test::system_python, ws()));
  const auto expected_tag = fmt::format("cp{}-linux_x86_64", answer.cache_tag.substr(answer.cache_tag.find('-') + 1));
  EXPECT_EQ(d.platform_tag, expected_tag);
}

TEST_F(discovery_probe, a_venv_brings_its_own_site_packages) {
  const auto venv = dir / "venv";
  const auto made = test::run({test::system_python, "-m", "venv", "--without-pip", venv.string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto d = probe_and_classify({.python = (venv / "bin/python").string(), .working_dir = ws()});
  EXPECT_EQ(real(answer.prefix), real(venv));
  std::vector<fs::path> sites;
  for (const auto* e : d.shipped())
    if (e->what == kind::site_packages) sites.push_back(e->real_path);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0], real(venv / "lib" / fmt::format("python{}", d.version.substr(0, d.version.rfind('.'))) /
                           "site-packages"));
  EXPECT_EQ(kind_of(d, "/usr/lib/python3/dist-packages"), "absent");  // no system site packages
  EXPECT_EQ(d.executable, venv / "bin/python");
}

TEST_F(discovery_probe, pythonpath_adds_other_entries_and_site_packages_can_be_skipped) {
  const auto extra = dir / "extra";
  fs::create_directories(extra);
  const auto pythonpath = fmt::format("{}:{}", extra.string(), (dir / "nope").string());
  const probe_request request{.python = test::system_python, .working_dir = ws(),
                              .env = env_with({{"PYTHONPATH", pythonpath}})};
  const auto d = probe_and_classify(request, false);
  EXPECT_EQ(kind_of(d, extra), "other");
  EXPECT_EQ(kind_of(d, dir / "nope"), "missing");
  EXPECT_EQ(kind_of(d, "/usr/lib/python3/dist-packages"), "skipped_site_packages");
  const auto shipped = d.shipped();
  ASSERT_EQ(shipped.size(), 2u);
  EXPECT_EQ(shipped[0]->what, kind::workspace);
  EXPECT_EQ(shipped[1]->real_path, real(extra));
  // PYTHONPATH comes before the stdlib in sys.path, so the entry order shows it too.
  EXPECT_EQ(d.entries.at(1).real_path, real(extra));
}

TEST_F(discovery_probe, is_traced_with_the_executable_and_version) {
  const auto d = probe_and_classify({.python = test::system_python, .working_dir = ws()});
  const auto ends = ends_of(trace.flushed_text(), action_types::packaging::probe);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(text_of(ends[0], "action_status"), "succeeded");
  EXPECT_EQ(text_of(ends[0], "version"), d.version);
  EXPECT_EQ(text_of(ends[0], "executable"), answer.executable);
  EXPECT_NE(trace.flushed_text().find(R"("python":"/usr/bin/python3")"), std::string::npos);
}

// ---- the probe's failures --------------------------------------------------------------------------------

TEST_F(discovery_probe, a_missing_interpreter_is_named) {
  const auto r = probe({.python = "ferry-no-such-python3", .working_dir = ws()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::python_failed));
  EXPECT_NE(diag.message.find("'ferry-no-such-python3'"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("packaging.python"), std::string::npos) << diag.message;
  const auto ends = ends_of(trace.flushed_text(), action_types::packaging::probe);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(text_of(ends[0], "action_status"), "failed");
}

TEST_F(discovery_probe, a_nonzero_exit_quotes_stderr) {
  const auto python = write_script(dir, "bin/broken-python",
                                   "echo 'Traceback (most recent call last):' >&2\n"
                                   "echo 'ModuleNotFoundError: no module named encodings' >&2\nexit 3");
  const auto r = probe({.python = python.string(), .working_dir = ws()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::python_failed));
  EXPECT_NE(diag.message.find("ModuleNotFoundError: no module named encodings"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("status 3"), std::string::npos) << diag.message;
}

TEST_F(discovery_probe, garbage_on_stdout_is_bad_output) {
  const auto python = write_script(dir, "bin/chatty-python", "echo 'I am not python'");
  const auto r = probe({.python = python.string(), .working_dir = ws()});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::bad_probe_output));
  EXPECT_NE(diag.message.find("I am not python"), std::string::npos) << diag.message;
}

// The fake interpreter records its pid and its own child's, then sleeps.
fs::path sleeping_python(const temp_dir& dir) {
  return write_script(dir, "bin/sleepy-python",
                      fmt::format("echo $$ > {0}/pid.tmp && mv {0}/pid.tmp {0}/pid\n"
                                  "sleep 60 &\necho $! > {0}/grandchild\nwait",
                                  dir.path().string()));
}

TEST_F(discovery_probe, a_late_answer_times_out_and_the_interpreter_is_gone) {
  const auto python = sleeping_python(dir);
  const auto r = probe({.python = python.string(), .working_dir = ws(), .timeout = 300ms});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::probe_timeout));
  EXPECT_NE(diag.message.find("300ms"), std::string::npos) << diag.message;
  const auto pid = read_pid(dir / "pid");
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::kill(pid, 0), -1);  // reaped: not even a zombie is left
  EXPECT_EQ(errno, ESRCH);
  // Its own child got SIGKILL with the group; it dies as soon as the kernel runs it.
  const auto grandchild = read_pid(dir / "grandchild");
  ASSERT_GT(grandchild, 0);
  for (int i = 0; i < 1000 && !dead_or_zombie(grandchild); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(dead_or_zombie(grandchild)) << "the interpreter's child " << grandchild << " outlived it";
}

TEST_F(discovery_probe, cancelling_discover_kills_the_interpreter) {
  const auto python = sleeping_python(dir);
  asio::io_context io;
  asio::cancellation_signal stop;
  std::optional<result<discovery>> outcome;
  const discover_options opts{.python = python.string(), .working_dir = ws(), .timeout = 60s,
                              .cache_file = dir / "cache.json"};
  asio::co_spawn(io, discovering(opts), asio::bind_cancellation_slot(stop.slot(), [&](std::exception_ptr e, auto r) {
                   if (e) std::rethrow_exception(e);
                   outcome = r;
                 }));
  // Until the interpreter runs; the bound only turns a hang into a failure.
  for (int i = 0; i < 6000 && !fs::exists(dir / "pid") && !outcome; ++i) io.run_for(10ms);
  ASSERT_FALSE(outcome) << diag.message;
  stop.emit(asio::cancellation_type::total);
  io.run_for(60s);
  ASSERT_TRUE(outcome) << "still waiting after cancellation";
  ASSERT_FALSE(*outcome);
  EXPECT_EQ(outcome->error(), asio::error::operation_aborted);
  const auto pid = read_pid(dir / "pid");
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  const auto ends = ends_of(trace.flushed_text(), action_types::packaging::discover);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(text_of(ends[0], "action_status"), "failed");
}

// ---- the cache -------------------------------------------------------------------------------------------

// A fake interpreter that counts its runs, then execs the real python with its arguments. Its user site
// (PYTHONUSERBASE) is a site-packages directory of the test's own, which the test may change.
class discovery_cache : public with_io {
 protected:
  discovery_cache() {
    fs::create_directories(ws);
    fs::create_directories(user_site);
    python = write_script(dir, "bin/python3", counting_body());
    backdate(python);
    backdate(user_site);
    opts.python = python.string();
    opts.working_dir = ws;
    opts.cache_file = dir / "cache/ferry/discovery.json";
    pythonpath.reset();
    use_env();
  }

  std::string counting_body() const {
    return fmt::format("echo run >> {}\nexec {} \"$@\"", (dir / "count").string(), test::system_python);
  }

  void use_env() {
    opts.env = env_with({{"PYTHONUSERBASE", (dir / "userbase").string()}, {"PYTHONPATH", pythonpath}});
  }

  int runs() const {
    std::ifstream in(dir / "count");
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  // discover(), and whether it reused the cached answer (from the trace).
  bool discover_cached() {
    const auto d = discover_now(opts);
    EXPECT_TRUE(d) << diag.message;
    if (d) {
      EXPECT_EQ(kind_of(*d, user_site), "site_packages");
    }
    const auto ends = ends_of(trace.flushed_text(), action_types::packaging::discover);
    if (ends.empty() || !ends.back().at("cached").is_bool()) {
      ADD_FAILURE() << "no cached field";
      return false;
    }
    return ends.back().at("cached").as_bool();
  }

  // Runs discover twice: the first asks Python, the second must not.
  void prime() {
    const int before = runs();
    ASSERT_FALSE(discover_cached());
    ASSERT_EQ(runs(), before + 1);
    ASSERT_TRUE(discover_cached());
    ASSERT_EQ(runs(), before + 1);
  }

  fs::path ws = dir / "ws";
  fs::path user_site = dir / "userbase/lib/python3.11/site-packages";
  fs::path python;
  std::optional<std::string> pythonpath;
  discover_options opts;
};

TEST_F(discovery_cache, a_second_discover_is_cached_and_starts_no_python) {
  prime();
  EXPECT_TRUE(discover_cached());  // touching nothing keeps it cached
  EXPECT_EQ(runs(), 1);
  const auto cached = discover_now(opts);
  ASSERT_TRUE(cached) << diag.message;
  EXPECT_EQ(cached->entries.at(0).what, kind::workspace);
  EXPECT_EQ(runs(), 1);
}

TEST_F(discovery_cache, cached_and_probed_discoveries_agree) {
  opts.cache_file.clear();
  const auto probed = discover_now(opts);
  ASSERT_TRUE(probed) << diag.message;
  opts.cache_file = dir / "cache.json";
  prime();
  const auto cached = discover_now(opts);
  ASSERT_TRUE(cached) << diag.message;
  EXPECT_EQ(kinds(*cached), kinds(*probed));
  ASSERT_EQ(cached->entries.size(), probed->entries.size());
  for (std::size_t i = 0; i < cached->entries.size(); ++i)
    EXPECT_EQ(cached->entries[i].real_path, probed->entries[i].real_path);
  EXPECT_EQ(cached->version, probed->version);
  EXPECT_EQ(cached->executable, probed->executable);
}

TEST_F(discovery_cache, no_cache_file_means_python_every_time) {
  opts.cache_file.clear();
  EXPECT_FALSE(discover_cached());
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
}

TEST_F(discovery_cache, a_new_file_in_site_packages_invalidates) {
  prime();
  std::ofstream(user_site / "new_package.pth") << "\n";
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
}

TEST_F(discovery_cache, editing_a_pth_file_in_place_invalidates) {
  std::ofstream(user_site / "extra.pth") << "\n";
  backdate(user_site / "extra.pth");
  backdate(user_site);
  prime();
  {
    std::ofstream pth(user_site / "extra.pth", std::ios::app);
    pth << (dir / "somewhere").string() << "\n";
  }
  backdate(user_site);  // the directory itself looks unchanged
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
}

TEST_F(discovery_cache, changing_pythonpath_invalidates) {
  prime();
  pythonpath = (dir / "lib").string();
  use_env();
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
}

TEST_F(discovery_cache, a_python_version_file_in_the_working_dir_invalidates) {
  prime();
  dir.write("ws/.python-version", "3.11.7\n");
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
}

TEST_F(discovery_cache, replacing_the_interpreter_invalidates) {
  prime();
  const auto replacement = write_script(dir, "bin/python3.new", counting_body());
  backdate(replacement);
  fs::rename(replacement, python);
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
}

TEST_F(discovery_cache, a_corrupt_or_old_cache_file_is_ignored_and_rewritten) {
  prime();
  dir.write("cache/ferry/discovery.json", "{\"format\": \"ferry-discovery-1\", \"entries\": [{\"key\": ");
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
  EXPECT_TRUE(discover_cached());  // rewritten by the run before
  dir.write("cache/ferry/discovery.json", R"({"format": "ferry-discovery-0", "entries": []})");
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 3);
}

TEST_F(discovery_cache, an_answer_that_races_a_change_is_not_stored) {
  // A site-packages directory stamped after the probe started: the answer may predate the change.
  backdate(user_site, -3600s);
  EXPECT_FALSE(discover_cached());
  EXPECT_FALSE(discover_cached());
  EXPECT_EQ(runs(), 2);
  backdate(user_site);
  EXPECT_FALSE(discover_cached());
  EXPECT_TRUE(discover_cached());
  EXPECT_EQ(runs(), 3);
}

TEST_F(discovery_cache, keys_and_witnesses_of_a_launcher_script) {
  const auto key = make_cache_key(opts.python, opts.working_dir, opts.env);
  ASSERT_TRUE(key);
  EXPECT_EQ(key->resolved, python.string());
  EXPECT_EQ(key->env.at("PYTHONUSERBASE"), (dir / "userbase").string());
  EXPECT_FALSE(key->env.at("PYTHONPATH"));
  auto got = probe({.python = opts.python, .working_dir = ws, .env = opts.env});
  ASSERT_TRUE(got) << diag.message;
  const auto witnesses = gather_witnesses(*key, *got);
  auto has = [&](const fs::path& p) {
    return std::any_of(witnesses.begin(), witnesses.end(), [&](const witness& w) { return w.path == p.string(); });
  };
  EXPECT_TRUE(has(python));
  EXPECT_TRUE(has(got->executable));
  EXPECT_TRUE(has(user_site));
  EXPECT_TRUE(has(ws / ".python-version"));       // absent, recorded as such
  EXPECT_TRUE(has(dir.path() / ".python-version"));  // and in each parent
  EXPECT_TRUE(has("/.python-version"));
  EXPECT_FALSE(has(ws));  // the workspace root is no witness
  EXPECT_FALSE(make_cache_key("ferry-no-such-python3", ws, opts.env));
}

// Not a benchmark: prints what a cold and a warm discover cost through the pyenv shim, and checks that the
// warm ones are answered from the cache.
TEST_F(discovery_cache, warm_discover_through_the_pyenv_shim_uses_the_cache) {
  opts.python = "python3";
  opts.env = config::process_env();
  opts.cache_file = dir / "shim-cache.json";
  const auto cold_start = std::chrono::steady_clock::now();
  const auto cold = discover_now(opts);
  const auto cold_time = std::chrono::steady_clock::now() - cold_start;
  ASSERT_TRUE(cold) << diag.message;
  const bool stored =
      ends_of(trace.flushed_text(), action_types::packaging::discover).back().at("cache_stored").as_bool();
  ASSERT_TRUE(stored) << "an answer of python3 through the shim was not stored";
  constexpr int rounds = 20;
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    const auto warm = discover_now(opts);
    ASSERT_TRUE(warm) << diag.message;
    ASSERT_EQ(warm->entries.size(), cold->entries.size());
  }
  const auto warm_time = (std::chrono::steady_clock::now() - warm_start) / rounds;
  const auto ends = ends_of(trace.flushed_text(), action_types::packaging::discover);
  EXPECT_EQ(std::count_if(ends.begin(), ends.end(), [](auto& e) { return e.at("cached").as_bool(); }), rounds);
  using us = std::chrono::microseconds;
  std::cout << fmt::format("[ timing ] cold discover (python3 via pyenv shim): {} us, warm (cached): {} us\n",
                           std::chrono::duration_cast<us>(cold_time).count(),
                           std::chrono::duration_cast<us>(warm_time).count());
}

}  // namespace
}  // namespace ferry::packaging
