#include "support/moto.hpp"

#include "support/eliot.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace ferry::test {
namespace {

using namespace std::chrono_literals;

// CreateUser, CreatePolicy, AttachUserPolicy, CreateAccessKey: see the header.
constexpr int free_actions = 4;
constexpr int moto_start_attempts = 5;
constexpr auto moto_start_deadline = 60s;  // a loaded machine starts moto in a few seconds; this only ends a hang

// The interpreter on PATH that carries moto, hence botocore (not system_python, which carries eliot).
constexpr const char* moto_python = "python3";

// Spends the free actions through botocore, with retries off so that none is spent twice.
constexpr const char* setup_script = R"(
import json, sys
import botocore.session
from botocore.config import Config
iam = botocore.session.get_session().create_client(
    "iam", endpoint_url=sys.argv[1], region_name="us-east-1",
    aws_access_key_id="ferry-setup", aws_secret_access_key="ferry-setup",
    config=Config(retries={"total_max_attempts": 1}))
iam.create_user(UserName="ferry-test")
policy = {"Version": "2012-10-17",
          "Statement": [{"Effect": "Allow", "Action": ["s3:*", "ec2:*"], "Resource": "*"}]}
arn = iam.create_policy(PolicyName="ferry-test-s3-ec2", PolicyDocument=json.dumps(policy))["Policy"]["Arn"]
iam.attach_user_policy(UserName="ferry-test", PolicyArn=arn)
key = iam.create_access_key(UserName="ferry-test")["AccessKey"]
print(key["AccessKeyId"])
print(key["SecretAccessKey"])
)";

// Variables of the caller's environment that would change which credentials or endpoint a client uses.
const std::vector<std::string> leaking_variables = {
    "AWS_PROFILE",         "AWS_DEFAULT_PROFILE",  "AWS_SESSION_TOKEN",    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL_IAM", "AWS_CA_BUNDLE",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"};

sockaddr_in ipv4_address(const std::string& host, std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    throw std::runtime_error("moto_server: host must be an IPv4 address, not '" + host + "'");
  return addr;
}

bool connects(int fd, const std::string& host, std::uint16_t port) {
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  const auto addr = ipv4_address(host, port);
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

// True when something accepts TCP connections on host:port: the probe for a TLS server, where the
// plain HTTP probe below cannot work.
bool accepts_connections(const std::string& host, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = connects(fd, host, port);
  ::close(fd);
  return ok;
}

// True when something on host:port answers a request with an HTTP status line. /moto-api/config is
// served outside moto's authenticator, so probing spends none of the free actions.
bool answers_http(const std::string& host, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = false;
  if (connects(fd, host, port)) {
    const std::string request = "GET /moto-api/config HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
    char status[8] = {};
    ok = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()) &&
         ::recv(fd, status, sizeof status, MSG_WAITALL) == sizeof status &&
         std::memcmp(status, "HTTP/1.", 7) == 0;
  }
  ::close(fd);
  return ok;
}

std::vector<std::string> moto_environment(bool auth) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const auto name = kv.substr(0, kv.find('='));
    if (name != "INITIAL_NO_AUTH_ACTION_COUNT" && name != "MOTO_PORT") env.emplace_back(kv);
  }
  if (auth) env.push_back("INITIAL_NO_AUTH_ACTION_COUNT=" + std::to_string(free_actions));
  return env;
}

// moto_server itself, or the same application with keep-alive (see moto_options), on host:port.
std::vector<std::string> moto_command(const moto_options& o, std::uint16_t port) {
  std::vector<std::string> args{"moto_server"};
  if (o.serial) args = {moto_python, peer_script("moto_serial.py")};
  if (o.keep_alive) {
    args = {moto_python, peer_script("moto_keepalive.py")};
    if (o.idle_close.count() > 0)
      args.insert(args.end(), {"--idle-close", fmt::format("{:.3f}", o.idle_close.count() / 1000.0)});
  }
  args.insert(args.end(), {"-H", o.host, "-p", std::to_string(port)});
  if (!o.ssl_cert.empty()) args.insert(args.end(), {"-c", o.ssl_cert, "-k", o.ssl_key});
  return args;
}

// Starts moto_server in a process group of its own, with only stdin, stdout and stderr open: the pyenv shim forks on its way to Python, so the
// server is not always the child itself, and killing the group reaches it either way.
pid_t spawn_moto(const moto_options& o, std::uint16_t port, const std::filesystem::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // Nothing else of ours: a server left behind by a killed test or bench must not hold its descriptors,
  // the local nodes' flock(1) lock above all, which would stall every later run that waits for it.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  auto args = moto_command(o, port);
  auto env = moto_environment(o.auth);
  auto argp = c_pointers(args);
  auto envp = c_pointers(env);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0].c_str(), &actions, &attr, argp.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

std::uint16_t pick_free_port(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  auto addr = ipv4_address(host, 0);
  socklen_t size = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) throw std::runtime_error("cannot bind a port on " + host + ": " + std::strerror(error));
  return ntohs(addr.sin_port);
}

moto_server::moto_server(moto_options options) : options_(std::move(options)) {
  dir_.write("aws/config", "");
  dir_.write("aws/credentials", "");
  try {
    bool started = false;
    for (int attempt = 0; attempt < moto_start_attempts && !started; ++attempt) started = start(pick_free_port(host()));
    if (!started) throw std::runtime_error("moto_server: every free port was taken before moto could bind it");
    if (options_.auth) create_access_key();
  } catch (...) {
    stop();
    throw;
  }
}

moto_server::~moto_server() { stop(); }

bool moto_server::start(std::uint16_t port) {
  const auto log_path = dir_ / "moto.log";
  pid_ = spawn_moto(options_, port, log_path);
  port_ = port;
  const auto deadline = std::chrono::steady_clock::now() + moto_start_deadline;
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const auto text = log();
      // Another process took the port between pick_free_port and moto's bind: try another one.
      if (text.find("Address already in use") != std::string::npos) return false;
      throw std::runtime_error("moto_server exited before serving:\n" + last_bytes(text, 2000));
    }
    // Werkzeug logs "Running on" once it has bound the port itself, which tells our server from
    // another process that happens to answer on the same port.
    if (log().find("Running on") != std::string::npos &&
        (tls() ? accepts_connections(host(), port) : answers_http(host(), port)))
      return true;
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("moto_server did not answer on " + endpoint() + ":\n" + last_bytes(log(), 2000));
    std::this_thread::sleep_for(50ms);
  }
}

// SIGKILL before reaping: until the leader is reaped its process group id cannot be reused, so the
// signal reaches only moto's processes.
void moto_server::stop() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void moto_server::create_access_key() {
  process_options options;
  options.env = environment();
  options.unset_env = leaking_variables;
  const auto r = run({moto_python, "-c", setup_script, endpoint()}, options);
  const auto newline = r.out.find('\n');
  if (r.exit_code != 0 || newline == std::string::npos)
    throw std::runtime_error("moto_server: creating the IAM user failed:\n" + r.err + "\n" + last_bytes(log(), 2000));
  access_key_id_ = r.out.substr(0, newline);
  secret_access_key_ = r.out.substr(newline + 1, r.out.find('\n', newline + 1) - newline - 1);
}

std::string moto_server::endpoint() const {
  return (tls() ? "https://" : "http://") + host() + ":" + std::to_string(port_);
}

std::map<std::string, std::string> moto_server::environment() const {
  std::map<std::string, std::string> env{
      {"AWS_ACCESS_KEY_ID", access_key_id_},
      {"AWS_SECRET_ACCESS_KEY", secret_access_key_},
      {"AWS_DEFAULT_REGION", region()},
      {"AWS_REGION", region()},
      {"AWS_ENDPOINT_URL", endpoint()},
      {"AWS_CONFIG_FILE", (dir_ / "aws/config").string()},
      {"AWS_SHARED_CREDENTIALS_FILE", (dir_ / "aws/credentials").string()},
      {"AWS_EC2_METADATA_DISABLED", "true"},
  };
  if (!options_.ca_bundle.empty()) env["AWS_CA_BUNDLE"] = options_.ca_bundle;
  return env;
}

process_options moto_server::process_env() const {
  process_options options;
  options.env = environment();
  options.unset_env = leaking_variables;
  return options;
}

process_result moto_server::aws(const std::vector<std::string>& args, process_options options) const {
  for (const auto& [name, value] : environment()) options.env.try_emplace(name, value);
  options.unset_env.insert(options.unset_env.end(), leaking_variables.begin(), leaking_variables.end());
  std::vector<std::string> argv{"aws", "--endpoint-url", endpoint()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, options);
}

void moto_server::make_bucket(const std::string& name) const {
  const auto r = aws({"s3api", "create-bucket", "--bucket", name});
  if (r.exit_code != 0) throw std::runtime_error("cannot create bucket '" + name + "': " + r.err + r.out);
}

void moto_server::freeze() const {
  if (pid_ > 0) ::kill(-pid_, SIGSTOP);
}

void moto_server::thaw() const {
  if (pid_ > 0) ::kill(-pid_, SIGCONT);
}

std::string moto_server::log() const { return read_file(dir_ / "moto.log"); }

}  // namespace ferry::test
