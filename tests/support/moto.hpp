#pragma once
// A real moto_server per test: the S3, IAM and EC2 peer that ferry talks to in tests.
//
// The server listens on a free port of `host` (127.0.0.1, or the bridge address 10.200.0.1 when nodes
// in network namespaces must reach it) and dies, with its whole process group, in the destructor.
//
// Signature checking (`auth = true`) works through moto's INITIAL_NO_AUTH_ACTION_COUNT: moto serves
// that many requests without checking who signed them, then verifies SigV4 against the IAM users it
// knows. The fixture starts moto with a count of exactly 4 and spends those 4 free actions itself, on
// CreateUser, CreatePolicy (s3:* and ec2:*), AttachUserPolicy and CreateAccessKey. The key it gets back
// is the only one moto accepts afterwards: a wrong secret fails with SignatureDoesNotMatch, an unknown
// key id with InvalidAccessKeyId. With auth off, any credentials work.
//
// Known limits of moto 5.2.1's checking, as seen from botocore's own signatures:
// - presigned GETs fail with HTTP 500 while auth is on: test presigned downloads with auth off;
// - requests whose signed object key or query value holds characters such as + & = : % or non-ASCII
//   (and a ListObjectsV2 with delimiter=/) fail with SignatureDoesNotMatch although they are signed
//   correctly: with auth on, keep keys and query values to letters, digits, '-', '_', '.', '~', ' '
//   and '/' in the key.
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ferry::test {

struct moto_options {
  bool auth = false;               // verify SigV4 against the IAM user the fixture creates
  std::string host = "127.0.0.1";  // the address moto binds and endpoint() names
  // HTTPS: moto serves TLS with this certificate (chain) and key, PEM files, and endpoint() says
  // https. `ca_bundle` is what clients should trust: it goes into environment() as AWS_CA_BUNDLE, for
  // the aws CLI and the fixture's own botocore set-up.
  std::string ssl_cert;
  std::string ssl_key;
  std::string ca_bundle;
  // moto_server answers every request with "Connection: close" (werkzeug's development server does),
  // so no client ever reuses a connection to it. keep_alive serves the same moto application through
  // tests/peers/moto_keepalive.py, which keeps connections open, and with `idle_close` above zero closes
  // one that has waited that long for its next request (logging "Request timed out").
  bool keep_alive = false;
  std::chrono::milliseconds idle_close{0};
  // One request at a time (tests/peers/moto_serial.py): S3 applies a conditional write atomically, and
  // moto's threaded server checks the ETag and stores without a lock, so racing If-Match PUTs can both
  // land there. For tests of writers racing through conditional writes.
  bool serial = false;
};

class moto_server {
 public:
  explicit moto_server(moto_options options = {});
  ~moto_server();
  moto_server(const moto_server&) = delete;
  moto_server& operator=(const moto_server&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& host() const { return options_.host; }
  std::string endpoint() const;  // "http://127.0.0.1:PORT", or https:// with ssl_cert
  bool auth() const { return options_.auth; }
  bool tls() const { return !options_.ssl_cert.empty(); }
  const std::string& access_key_id() const { return access_key_id_; }
  const std::string& secret_access_key() const { return secret_access_key_; }
  std::string region() const { return "us-east-1"; }

  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_REGION, AWS_ENDPOINT_URL, and
  // AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE naming empty files, so that the machine's ~/.aws never
  // leaks into a test. For the aws CLI, botocore, and ferry alike.
  std::map<std::string, std::string> environment() const;

  // environment(), plus the caller's variables that would override it (AWS_PROFILE, AWS_SESSION_TOKEN,
  // AWS_ENDPOINT_URL_S3, ...) to unset: the options for run() or run_ferry() of a client of this server.
  process_options process_env() const;

  // Runs the aws CLI against this server with environment() (plus options.env), e.g.
  // aws({"s3", "cp", file, "s3://bucket/key"}).
  process_result aws(const std::vector<std::string>& args, process_options options = {}) const;

  // Creates a bucket; throws std::runtime_error with the CLI's output when that fails.
  void make_bucket(const std::string& name) const;

  // Stops the server's whole process group (SIGSTOP) and lets it go on (SIGCONT): storage and API that
  // accept connections and never answer, as a hung server or a partitioned network does.
  void freeze() const;
  void thaw() const;

  // The server's log (werkzeug's request lines and tracebacks), for failure messages.
  std::string log() const;

 private:
  bool start(std::uint16_t port);  // false when another process took the port first
  void stop();
  void create_access_key();

  moto_options options_;
  temp_dir dir_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  std::string access_key_id_ = "ferry-test-key-id";
  std::string secret_access_key_ = "ferry-test-secret";
};

// A port on `host` that nobody listened on a moment ago: bind port 0, read it, release it. Another
// process may take it before the caller binds it, so callers must retry.
std::uint16_t pick_free_port(const std::string& host = "127.0.0.1");

}  // namespace ferry::test
