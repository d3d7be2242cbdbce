// `ferry doctor` as a user runs it: the real binary against a real moto_server that checks signatures, with
// ferry's SSH key and known_hosts in a temporary XDG config dir. Each test breaks one thing and reads the
// line of the check that must catch it.
#include "support/loopback_listener.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "tracing/action_types.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace ferry::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// One line of the report: its mark (✓ ✗ —), the rest of it, and the fix line beneath it, if any.
struct report_line {
  std::string mark;
  std::string text;
  std::string fix;
};

// The report's lines by check name.
std::map<std::string, report_line> lines_of(const std::string& out) {
  std::map<std::string, report_line> by_name;
  std::istringstream in(out);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("  ") && !last.empty()) {
      const auto at = line.find("fix: ");
      if (at != std::string::npos) by_name[last].fix = line.substr(at + 5);
      continue;
    }
    const auto space = line.find(' ');
    if (space == std::string::npos || line.starts_with("ferry doctor:")) continue;
    std::istringstream words(line.substr(space + 1));
    std::string name;
    words >> name;
    by_name[name] = {line.substr(0, space), line, {}};
    last = name;
  }
  return by_name;
}

// A tiny HTTP server for what moto cannot play: a captive portal, a far-off Date, a PUT that never answers.
// Each request's first line goes to `answer`, which returns the whole response, or "" to never answer.
class fake_http {
 public:
  using responder = std::function<std::string(const std::string& request_line)>;

  explicit fake_http(responder answer) : answer_(std::move(answer)) {
    const auto listener = test::listen_on_loopback("fake_http");
    fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_http() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  bool saw(std::string_view method) const {
    for (const auto& r : requests())
      if (r.starts_with(method)) return true;
    return false;
  }

  static std::string reply(int status, std::string_view headers, std::string_view body) {
    return fmt::format("HTTP/1.1 {} X\r\n{}Content-Length: {}\r\nConnection: close\r\n\r\n{}", status, headers,
                       body.size(), body);
  }
  static std::string now_date() {
    char text[64];
    const auto t = std::time(nullptr);
    std::tm utc{};
    ::gmtime_r(&t, &utc);
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
    return text;
  }

 private:
  bool readable(int fd) const {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 50) > 0;
  }

  void serve() {
    std::vector<int> silent;  // connections left unanswered, closed at the end
    while (!stop_) {
      if (!readable(fd_)) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string request;
      char buf[4096];
      // The head, then as much body as Content-Length says.
      while (!stop_ && request.find("\r\n\r\n") == std::string::npos) {
        if (!readable(c)) continue;
        const auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
      const auto line = request.substr(0, request.find("\r\n"));
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(line);
      }
      const auto response = answer_(line);
      if (response.empty()) {
        silent.push_back(c);
        continue;
      }
      ::send(c, response.data(), response.size(), MSG_NOSIGNAL);
      ::shutdown(c, SHUT_WR);
      ::close(c);
    }
    for (const int c : silent) ::close(c);
  }

  responder answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::string> requests_;
};

const std::vector<std::string> storage_checks = {"credentials", "endpoint", "clock", "storage.list", "storage.write"};
const std::vector<std::string> ssh_checks = {"ssh.key", "ssh.known_hosts"};

class doctor_cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new moto_server(moto_options{.auth = true});
    moto_->make_bucket("doctor-ok");
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  void SetUp() override {
    options_ = moto_->process_env();
    options_.cwd = dir_.path();
    use_home(options_, dir_.path());
    // The bucket's root: moto 5.2.1 refuses the signature of any listing whose prefix holds a '/' (botocore's
    // own too), and a prefix always ends in one. writes_under_the_prefix checks a prefix, without auth.
    options_.env["FERRY_STORAGE_URL"] = "s3://doctor-ok";
    for (const auto* name : {"FERRY_TASK_ID", "SSH_AUTH_SOCK", "FERRY_SSH_IDENTITY_FILE", "FERRY_STORAGE_ENDPOINT",
                             "FERRY_NET_CONNECT_TIMEOUT", "FERRY_STORAGE_REGION"})
      options_.unset_env.push_back(name);
    make_ssh_files();
  }

  fs::path ferry_config() const { return dir_ / "config" / "ferry"; }
  fs::path key_file() const { return ferry_config() / "id_ed25519"; }

  // ferry's key, made as a user would make it, and a known_hosts that records one node with it.
  void make_ssh_files() const {
    fs::create_directories(ferry_config());
    const auto made = run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ferry", "-f", key_file().string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    std::istringstream pub(read_file(fs::path(key_file().string() + ".pub")));
    std::string type, blob;
    pub >> type >> blob;
    dir_.write("config/ferry/known_hosts", fmt::format("# ferry's own\nlocal-0001 {} {}\n", type, blob));
    fs::permissions(ferry_config() / "known_hosts", fs::perms::owner_read | fs::perms::owner_write);
  }

  process_result doctor(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"--trace", trace_file().string(), "doctor"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_ferry(args, options_);
  }

  fs::path trace_file() const { return dir_ / "trace.jsonl"; }

  // Every message of the trace, parsed.
  std::vector<json::object> trace() const {
    std::vector<json::object> out;
    std::istringstream in(read_file(trace_file()));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(json::parse(line).as_object());
    return out;
  }

  static void expect_marks(const std::map<std::string, report_line>& lines, const std::vector<std::string>& names,
                           const std::string& mark, const std::string& out) {
    for (const auto& name : names) {
      const auto it = lines.find(name);
      ASSERT_NE(it, lines.end()) << name << " missing in:\n" << out;
      EXPECT_EQ(it->second.mark, mark) << it->second.text;
    }
  }

  static moto_server* moto_;
  temp_dir dir_;
  process_options options_;
};

moto_server* doctor_cli::moto_ = nullptr;

TEST_F(doctor_cli, all_good_passes_every_check_and_leaves_nothing_behind) {
  const auto r = doctor();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << moto_->log();
  const auto lines = lines_of(r.out);
  expect_marks(lines, storage_checks, "✓", r.out);
  expect_marks(lines, ssh_checks, "✓", r.out);
  EXPECT_TRUE(contains(lines.at("credentials").text, "from environment")) << r.out;
  EXPECT_TRUE(contains(lines.at("endpoint").text, "AWS_ENDPOINT_URL")) << r.out;
  EXPECT_TRUE(contains(lines.at("ssh.known_hosts").text, "1 nodes recorded")) << r.out;
  EXPECT_TRUE(contains(r.out, "all 7 checks passed")) << r.out;

  // The write check really wrote under the prefix and deleted what it wrote.
  int puts = 0, deletes = 0, checks = 0;
  for (const auto& m : trace()) {
    if (m.contains("message_type") && m.at("message_type").as_string() == action_types::doctor::request) {
      const auto op = m.at("operation").as_string();
      const auto status = m.at("status").is_number() ? m.at("status").to_number<int>() : 0;
      if (op == "PutObject" && status == 200) ++puts;
      if (op == "DeleteObject" && status / 100 == 2) ++deletes;
    }
    if (m.contains("action_type") && m.at("action_type").as_string() == action_types::doctor::check &&
        m.at("action_status").as_string() == "succeeded")
      ++checks;
  }
  EXPECT_EQ(puts, 1);
  EXPECT_EQ(deletes, 1);
  EXPECT_EQ(checks, 7);

  const auto j = doctor({"--json"});
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const auto doc = json::parse(j.out).as_object();
  EXPECT_TRUE(doc.at("ok").as_bool());
  const auto& list = doc.at("checks").as_array();
  ASSERT_EQ(list.size(), 7u) << j.out;
  for (const auto& c : list) {
    EXPECT_TRUE(c.at("ok").as_bool()) << json::serialize(c);
    EXPECT_EQ(c.at("status").as_string(), "passed");
    EXPECT_TRUE(c.at("fix").is_null());
  }
  EXPECT_EQ(list.at(0).at("name").as_string(), "credentials");  // the report's order, whatever finished first

  EXPECT_TRUE(contains(lines.at("storage.write").text, "wrote and deleted s3://doctor-ok/.ferry-doctor-")) << r.out;
  const auto listed = moto_->aws({"s3api", "list-objects-v2", "--bucket", "doctor-ok"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_FALSE(contains(listed.out, ".ferry-doctor-")) << listed.out;
}

TEST_F(doctor_cli, writes_under_the_prefix) {
  moto_server plain;  // without signature checks, which refuse listings of a prefix (see SetUp)
  plain.make_bucket("doctor-prefix");
  auto options = plain.process_env();
  for (const auto& name : {"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"})
    options.env[name] = options_.env.at(name);
  options.unset_env.insert(options.unset_env.end(), options_.unset_env.begin(), options_.unset_env.end());
  options.cwd = dir_.path();
  options.env["FERRY_STORAGE_URL"] = "s3://doctor-prefix/team/project";
  const auto r = run_ferry({"doctor"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = lines_of(r.out);
  EXPECT_TRUE(contains(lines.at("storage.list").text, "s3://doctor-prefix/team/project/ can be listed")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").text, "wrote and deleted s3://doctor-prefix/team/project/.ferry-doctor-"))
      << r.out;
  const auto listed = plain.aws({"s3api", "list-objects-v2", "--bucket", "doctor-prefix"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_FALSE(contains(listed.out, ".ferry-doctor-")) << listed.out;
}

TEST_F(doctor_cli, a_wrong_secret_is_named_and_never_shown) {
  const std::string wrong = "Wr0ngSecretZq9x7Kp2Lm4Tt8Vv";
  options_.env["AWS_SECRET_ACCESS_KEY"] = wrong;
  const auto r = doctor();
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  expect_marks(lines, {"credentials", "endpoint", "clock"}, "✓", r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.list"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.list").text, "SignatureDoesNotMatch")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.list").fix, "secret access key")) << r.out;
  expect_marks(lines, {"storage.write"}, "—", r.out);
  // The key id shows masked; the secret, wrong or right, appears nowhere, not even in part.
  EXPECT_TRUE(contains(lines.at("credentials").text, "…")) << r.out;
  const auto traced = read_file(trace_file());
  for (const auto& secret : {wrong.substr(0, 8), moto_->secret_access_key()}) {
    EXPECT_FALSE(contains(r.out, secret)) << r.out;
    EXPECT_FALSE(contains(r.err, secret)) << r.err;
    EXPECT_FALSE(contains(traced, secret));
  }
}

TEST_F(doctor_cli, an_unknown_key_id_is_named) {
  options_.env["AWS_ACCESS_KEY_ID"] = "AKIAUNKNOWNDOCTOR123";
  const auto r = doctor({"--json"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto doc = json::parse(r.out).as_object();
  EXPECT_FALSE(doc.at("ok").as_bool());
  for (const auto& c : doc.at("checks").as_array()) {
    if (c.at("name").as_string() != "storage.list") continue;
    EXPECT_EQ(c.at("status").as_string(), "failed");
    EXPECT_TRUE(contains(std::string(c.at("detail").as_string()), "InvalidAccessKeyId")) << json::serialize(c);
    EXPECT_TRUE(contains(std::string(c.at("fix").as_string()), "access key id")) << json::serialize(c);
  }
}

TEST_F(doctor_cli, a_missing_bucket_is_named) {
  options_.env["FERRY_STORAGE_URL"] = "s3://no-such-doctor-bucket";
  const auto r = doctor();
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.list"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.list").text, "'no-such-doctor-bucket' does not exist")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.list").fix, "aws s3 mb s3://no-such-doctor-bucket")) << r.out;
  expect_marks(lines, {"storage.write"}, "—", r.out);
  expect_marks(lines, {"credentials", "endpoint", "clock"}, "✓", r.out);
}

TEST_F(doctor_cli, a_clock_15_minutes_off_fails_and_5_minutes_passes) {
  for (const auto& [offset, direction] : std::map<std::string, std::string>{{"--clock-offset=20m", "ahead of"},
                                                                            {"--clock-offset=-20m", "behind"}}) {
    const auto r = doctor({offset});
    EXPECT_NE(r.exit_code, 0) << offset << "\n" << r.out;
    const auto lines = lines_of(r.out);
    ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"clock"}, "✗", r.out));
    EXPECT_TRUE(contains(lines.at("clock").text, direction)) << r.out;
    EXPECT_TRUE(contains(lines.at("clock").fix, "clock right")) << r.out;
  }

  const auto r = doctor({"--clock-offset", "5m"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  expect_marks(lines, storage_checks, "✓", r.out);
  EXPECT_TRUE(contains(lines.at("clock").text, "ahead of")) << r.out;

  const auto bad = doctor({"--clock-offset", "soon"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "--clock-offset")) << bad.err;
  const auto help = run_ferry({"doctor", "--help"}, options_);
  EXPECT_TRUE(contains(help.out, "--clock-offset")) << help.out;
  EXPECT_TRUE(contains(help.out, "test aid")) << help.out;
}

TEST_F(doctor_cli, an_unreachable_endpoint_fails_and_skips_what_needs_it) {
  options_.env["AWS_ENDPOINT_URL"] = fmt::format("http://127.0.0.1:{}", pick_free_port());
  options_.env["FERRY_NET_CONNECT_TIMEOUT"] = "2s";
  const auto r = doctor();
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"endpoint"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("endpoint").text, "does not answer")) << r.out;
  EXPECT_TRUE(contains(lines.at("endpoint").text, "AWS_ENDPOINT_URL")) << r.out;
  EXPECT_FALSE(lines.at("endpoint").fix.empty()) << r.out;
  expect_marks(lines, {"clock", "storage.list", "storage.write"}, "—", r.out);
  expect_marks(lines, {"credentials", "ssh.key", "ssh.known_hosts"}, "✓", r.out);

  const auto j = doctor({"--json"});
  const auto doc = json::parse(j.out).as_object();
  EXPECT_FALSE(doc.at("ok").as_bool());
  EXPECT_EQ(doc.at("checks").as_array().at(2).at("status").as_string(), "skipped");
}

TEST_F(doctor_cli, a_missing_ssh_key_fails_with_the_fix) {
  fs::remove(key_file());
  const auto r = doctor();
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"ssh.key"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("ssh.key").text, key_file().string() + " does not exist")) << r.out;
  EXPECT_TRUE(contains(lines.at("ssh.key").fix, "ssh-keygen -t ed25519")) << r.out;
  expect_marks(lines, storage_checks, "✓", r.out);
  EXPECT_FALSE(fs::exists(key_file())) << "the doctor made the key it reports missing";
}

TEST_F(doctor_cli, an_ssh_key_others_can_read_fails) {
  fs::permissions(key_file(), fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  const auto r = doctor();
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  EXPECT_EQ(lines.at("ssh.key").mark, "✗") << r.out;
  EXPECT_TRUE(contains(lines.at("ssh.key").text, "mode 0644")) << r.out;
  EXPECT_EQ(lines.at("ssh.key").fix, "chmod 600 " + key_file().string()) << r.out;
}

TEST_F(doctor_cli, a_malformed_known_hosts_fails) {
  dir_.write("config/ferry/known_hosts", "local-0001 ssh-ed25519\n");
  fs::permissions(ferry_config() / "known_hosts", fs::perms::owner_read | fs::perms::owner_write);
  const auto r = doctor();
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  EXPECT_EQ(lines.at("ssh.known_hosts").mark, "✗") << r.out;
  EXPECT_TRUE(contains(lines.at("ssh.known_hosts").text, "known_hosts:1")) << r.out;
  expect_marks(lines, {"ssh.key"}, "✓", r.out);
}

// --nodes without making nodes (test_doctor_nodes.cpp has a real one): a registry node its provider says is
// gone passes as such, and one nobody answers for fails, naming it, with the way to end it.
TEST_F(doctor_cli, nodes_of_the_registry_are_checked_each) {
  const auto port = pick_free_port();
  const auto node = [](std::string id, std::string provider, std::uint16_t at) {
    return json::object{{"id", id}, {"provider", provider}, {"name", id}, {"host", "127.0.0.1"}, {"port", at},
                        {"user", "root"}, {"state", "running"}, {"created_at", 1}, {"last_used_at", 1}};
  };
  const json::object registry{
      {"version", 1},
      {"nodes", json::array{node("local-0dead0", "local", 22), node("elsewhere-1", "no-such-provider", port)}}};
  dir_.write("state/ferry/nodes.json", json::serialize(registry));
  options_.env["FERRY_SSH_CONNECT_TIMEOUT"] = "2s";
  const auto r = doctor({"--nodes"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  expect_marks(lines, {"node.program", "node:local-0dead0"}, "✓", r.out);
  EXPECT_TRUE(contains(lines.at("node:local-0dead0").text, "is terminated")) << r.out;
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"node:elsewhere-1"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("node:elsewhere-1").text, fmt::format("127.0.0.1:{}", port))) << r.out;
  EXPECT_TRUE(contains(lines.at("node:elsewhere-1").fix, "ferry nodes down elsewhere-1")) << r.out;

  // Without its key, ferry cannot log in anywhere: the nodes are not tried.
  fs::remove(key_file());
  const auto keyless = lines_of(doctor({"--nodes"}).out);
  ASSERT_TRUE(keyless.contains("nodes"));
  EXPECT_EQ(keyless.at("nodes").mark, "—");
  EXPECT_FALSE(keyless.contains("node:elsewhere-1"));
}

// -------------------------------------------------------------------------------------------------
// What the outside tester found (notes/doctor_attack.md), one test each.

TEST_F(doctor_cli, a_date_centuries_away_is_implausible_not_a_crash) {
  fake_http far([](const std::string&) {
    return fake_http::reply(200, "Date: Mon, 01 Jan 2300 00:00:00 GMT\r\n", "");
  });
  options_.env["AWS_ENDPOINT_URL"] = far.endpoint();
  const auto r = doctor();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // a check failed; not UBSan's abort
  EXPECT_FALSE(contains(r.err, "runtime error")) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"clock"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("clock").text, "Date header is implausible")) << r.out;
}

TEST_F(doctor_cli, a_date_in_rfc_850_or_asctime_format_is_read) {
  for (const auto* format : {"%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    fake_http old([format](const std::string&) {
      char text[64];
      const auto t = std::time(nullptr);
      std::tm utc{};
      ::gmtime_r(&t, &utc);
      std::strftime(text, sizeof text, format, &utc);
      return fake_http::reply(200, fmt::format("Date: {}\r\n", text), "");
    });
    options_.env["AWS_ENDPOINT_URL"] = old.endpoint();
    const auto lines = lines_of(doctor().out);
    ASSERT_TRUE(lines.contains("clock")) << format;
    EXPECT_EQ(lines.at("clock").mark, "✓") << lines.at("clock").text;
  }
}

TEST_F(doctor_cli, credentials_in_the_endpoint_url_are_never_shown) {
  const auto port = pick_free_port();
  for (const auto& [url, secret] : std::map<std::string, std::string>{
           {fmt::format("http://usr:PASSWORDinURL@127.0.0.1:{}", port), "PASSWORDinURL"},
           {fmt::format("http://:PASSONLY@127.0.0.1:{}", port), "PASSONLY"},
           {fmt::format("http://127.0.0.1:{}/?X-Amz-Signature=QUERYSECRET", port), "QUERYSECRET"}}) {
    options_.env["AWS_ENDPOINT_URL"] = url;
    const auto r = doctor();
    const auto j = doctor({"--json"});
    const auto lines = lines_of(r.out);
    ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"endpoint"}, "✗", r.out));
    for (const auto& text : {r.out, r.err, j.out, j.err, read_file(trace_file())})
      EXPECT_FALSE(contains(text, secret)) << text;
    const auto ls = run_ferry({"storage", "ls"}, options_);
    EXPECT_NE(ls.exit_code, 0);
    EXPECT_FALSE(contains(ls.out + ls.err, secret)) << ls.out << ls.err;
  }
}

TEST_F(doctor_cli, credentials_in_the_storage_url_are_refused_and_never_shown) {
  options_.env["FERRY_STORAGE_URL"] = "s3://AKIAX:STORAGEURLSECRET@doctor-ok/pre";
  const auto r = doctor();
  const auto j = doctor({"--json"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.list"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.list").text, "not an S3 bucket name")) << r.out;
  for (const auto& text : {r.out, r.err, j.out, j.err, read_file(trace_file())})
    EXPECT_FALSE(contains(text, "STORAGEURLSECRET")) << text;
}

TEST_F(doctor_cli, a_web_page_answering_200_is_not_storage) {
  fake_http portal([](const std::string&) {
    return fake_http::reply(200, fmt::format("Date: {}\r\nContent-Type: text/html\r\n", fake_http::now_date()),
                            "<html><body>Welcome to the hotel wifi</body></html>");
  });
  options_.env["AWS_ENDPOINT_URL"] = portal.endpoint();
  const auto r = doctor();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto lines = lines_of(r.out);
  expect_marks(lines, {"endpoint", "clock"}, "✓", r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.list"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.list").text, "answered HTTP 200 but not as S3 (text/html")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.list").fix, "AWS_ENDPOINT_URL")) << r.out;
  expect_marks(lines, {"storage.write"}, "—", r.out);
}

TEST_F(doctor_cli, a_put_answered_without_an_etag_is_not_storage_and_names_the_key) {
  fake_http half([](const std::string& line) {
    const auto date = fmt::format("Date: {}\r\n", fake_http::now_date());
    if (line.starts_with("GET") && contains(line, "list-type=2"))
      return fake_http::reply(200, date + "Content-Type: application/xml\r\n",
                              "<?xml version=\"1.0\"?><ListBucketResult><Name>doctor-ok</Name>"
                              "<IsTruncated>false</IsTruncated></ListBucketResult>");
    return fake_http::reply(200, date, "");
  });
  options_.env["AWS_ENDPOINT_URL"] = half.endpoint();
  const auto r = doctor();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto lines = lines_of(r.out);
  expect_marks(lines, {"endpoint", "clock", "storage.list"}, "✓", r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.write"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.write").text, "not as S3")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").text, "s3://doctor-ok/.ferry-doctor-")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").fix, "aws s3 rm s3://doctor-ok/.ferry-doctor-")) << r.out;
}

TEST_F(doctor_cli, http_errors_without_an_s3_code_get_no_s3_meaning) {
  for (const int status : {404, 503}) {
    fake_http plain([status](const std::string& line) {
      const auto date = fmt::format("Date: {}\r\nContent-Type: text/html\r\n", fake_http::now_date());
      if (line.starts_with("GET / ")) return fake_http::reply(200, date, "");  // the endpoint's ping
      return fake_http::reply(status, date, "<html>Not here</html>");
    });
    options_.env["AWS_ENDPOINT_URL"] = plain.endpoint();
    const auto r = doctor();
    const auto lines = lines_of(r.out);
    ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.list"}, "✗", r.out));
    EXPECT_TRUE(contains(lines.at("storage.list").text, fmt::format("HTTP {} without an S3 error code", status)))
        << r.out;
    EXPECT_FALSE(contains(lines.at("storage.list").text, "NoSuchBucket")) << r.out;
    EXPECT_FALSE(contains(lines.at("storage.list").text, "does not exist")) << r.out;
  }
}

// Storage that answers everything but a PUT, which it never answers.
std::string all_but_a_put(const std::string& line) {
  const auto date = fmt::format("Date: {}\r\n", fake_http::now_date());
  if (line.starts_with("PUT")) return std::string();
  if (contains(line, "list-type=2"))
    return fake_http::reply(200, date, "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  return fake_http::reply(200, date, "");
}

// A PUT that gets no answer may still have landed: the report names the probe key and how to remove it.
TEST_F(doctor_cli, a_put_without_an_answer_names_the_probe_it_may_leave) {
  fake_http stuck(all_but_a_put);
  options_.env["AWS_ENDPOINT_URL"] = stuck.endpoint();
  options_.env["FERRY_NET_READ_TIMEOUT"] = "1s";
  const auto r = doctor();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.write"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.write").text, "s3://doctor-ok/.ferry-doctor-")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").text, "may have been written")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").fix, "aws s3 rm s3://doctor-ok/.ferry-doctor-")) << r.out;
  bool keyed = false;
  for (const auto& m : trace())
    if (m.contains("message_type") && m.at("message_type").as_string() == action_types::doctor::request &&
        m.at("operation").as_string() == "PutObject")
      keyed = std::string(m.at("key").as_string()).starts_with(".ferry-doctor-");
  EXPECT_TRUE(keyed);
}

// Disabled: an HTTP request in flight does not end on Ctrl-C (net/http_connection's beast reads do not
// take cancellation, so with_deadline waits for them) and the shutdown's last step stops the io_context
// before the report is printed. Enable once net/ ends a request on cancellation.
TEST_F(doctor_cli, ctrl_c_reports_what_it_has_and_names_a_probe_that_may_be_left) {
  fake_http stuck(all_but_a_put);
  options_.env["AWS_ENDPOINT_URL"] = stuck.endpoint();
  options_.env["FERRY_NET_READ_TIMEOUT"] = "1h";  // only Ctrl-C ends the PUT
  const auto c = spawn_ferry({"--trace", trace_file().string(), "doctor"}, options_);
  for (int i = 0; i < 1200 && !stuck.saw("PUT"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(stuck.saw("PUT"));
  c->signal(SIGINT);
  const auto r = c->wait();
  EXPECT_EQ(r.exit_code, 130) << r.out << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"storage.write"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("storage.write").text, "interrupted")) << r.out;
  EXPECT_FALSE(contains(lines.at("storage.write").text, "no answer within")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").text, "s3://doctor-ok/.ferry-doctor-")) << r.out;
  EXPECT_TRUE(contains(lines.at("storage.write").fix, "aws s3 rm s3://doctor-ok/.ferry-doctor-")) << r.out;
  expect_marks(lines, {"ssh.key", "ssh.known_hosts"}, "✓", r.out);
}

TEST_F(doctor_cli, a_node_program_that_is_a_directory_fails_its_check) {
  fs::create_directories(dir_ / "not-a-program");
  options_.env["FERRY_AGENT_NODE_PROGRAM"] = (dir_ / "not-a-program").string();
  const auto r = doctor({"--nodes"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_FALSE(contains(r.err, "basic_filebuf")) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"node.program"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("node.program").text, "is not a regular file (a directory)")) << r.out;
  expect_marks(lines, storage_checks, "✓", r.out);
}

TEST_F(doctor_cli, a_known_hosts_that_is_a_directory_fails) {
  fs::remove(ferry_config() / "known_hosts");
  fs::create_directories(ferry_config() / "known_hosts");
  fs::permissions(ferry_config() / "known_hosts", fs::perms::owner_all);
  const auto r = doctor();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto lines = lines_of(r.out);
  ASSERT_NO_FATAL_FAILURE(expect_marks(lines, {"ssh.known_hosts"}, "✗", r.out));
  EXPECT_TRUE(contains(lines.at("ssh.known_hosts").text, "is not a regular file")) << r.out;
}

}  // namespace
}  // namespace ferry::test
