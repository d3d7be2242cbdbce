// HTTPS with real TLS peers and a CA made for the test: moto_server serving a certificate that CA
// signed, reached through ferry's own S3 client (in-process and as `ferry storage`), and openssl
// s_server for what moto cannot show: the host name check and SNI.
#include "config/loader.hpp"
#include "net/cancellation.hpp"
#include "net/error.hpp"
#include "net/http_connection.hpp"
#include "net/s3_session.hpp"
#include "net/tls_context.hpp"
#include "tracing/action_types.hpp"
#include "tracing/sink.hpp"

#include "support/moto.hpp"
#include "support/settings.hpp"
#include "support/trace_root.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <thread>

namespace ferry::net {
namespace {

using namespace std::chrono_literals;
using test::temp_dir;

// Runs the openssl CLI; a failure ends the test set-up with openssl's own words.
void openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = test::run(argv);
  if (r.exit_code != 0) throw std::runtime_error("openssl " + args.at(0) + " failed: " + r.err);
}

// A certificate authority of the test's own, and server certificates it signs, as PEM files in `dir`.
class test_ca {
 public:
  explicit test_ca(std::filesystem::path dir) : dir_(std::move(dir)) {
    // Only the sections named on the command line are used: the machine's openssl.cnf plays no part.
    write("openssl.cnf",
          "[req]\ndistinguished_name = dn\n[dn]\n"
          "[ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
          "subjectKeyIdentifier = hash\n");
    openssl({"req", "-x509", "-config", path("openssl.cnf"), "-extensions", "ca", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", path("ca.key"), "-out", bundle(), "-days", "2",
             "-subj", "/CN=ferry test CA"});
  }

  // NAME.pem and NAME.key: a server certificate for `alt_names`, e.g. "IP:127.0.0.1,DNS:localhost".
  void issue(const std::string& name, const std::string& alt_names) {
    write(name + ".cnf", "[leaf]\nsubjectAltName = " + alt_names +
                             "\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n");
    openssl({"req", "-new", "-config", path("openssl.cnf"), "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key(name), "-out", path(name + ".csr"), "-subj",
             "/CN=" + name});
    openssl({"x509", "-req", "-in", path(name + ".csr"), "-CA", bundle(), "-CAkey", path("ca.key"),
             "-CAcreateserial", "-days", "2", "-extfile", path(name + ".cnf"), "-extensions", "leaf", "-out",
             cert(name)});
  }

  std::string bundle() const { return path("ca.pem"); }
  std::string cert(const std::string& name) const { return path(name + ".pem"); }
  std::string key(const std::string& name) const { return path(name + ".key"); }

 private:
  std::string path(const std::string& file) const { return (dir_ / file).string(); }
  void write(const std::string& file, const std::string& text) const { std::ofstream(dir_ / file) << text; }

  std::filesystem::path dir_;
};

// openssl s_server on an ephemeral port of both loopback addresses, answering handshakes.
class tls_server {
 public:
  tls_server(const std::filesystem::path& log, std::vector<std::string> args) {
    // Through sh only to send the output to a file ($0), where the port can be read while it runs.
    std::vector<std::string> argv{"sh", "-c", "exec openssl s_server \"$@\" >\"$0\" 2>&1", log.string(),
                                  "-accept", "0", "-www"};
    argv.insert(argv.end(), args.begin(), args.end());
    process_ = test::spawn(argv);
    for (int i = 0; i < 600 && !port_; ++i) {  // a bound for a hang; it prints ACCEPT at once
      const auto text = test::read_file(log);
      if (const auto at = text.find("ACCEPT "); at != std::string::npos && text.find('\n', at) != std::string::npos)
        port_ = static_cast<std::uint16_t>(std::stoi(text.substr(text.rfind(':', text.find('\n', at)) + 1)));
      else
        std::this_thread::sleep_for(50ms);
    }
    if (!port_) throw std::runtime_error("openssl s_server did not start: " + test::read_file(log));
  }

  std::uint16_t port() const { return port_; }

 private:
  std::unique_ptr<test::child> process_;
  std::uint16_t port_ = 0;
};

template <class T>
T run_on(asio::io_context& io, asio::awaitable<T> task) {
  auto done = asio::co_spawn(io, std::move(task), asio::use_future);
  io.run();
  io.restart();
  return done.get();
}

// Connects and completes the TLS handshake, as every HTTPS request of ferry begins.
asio::awaitable<error_code> handshake(origin to, asio::ssl::context* tls, diagnostics& diag) {
  co_await accept_cancellation();
  auto connection = co_await http_connection::open(to, tls, http_timeouts{}, diag);
  co_return connection ? error_code{} : connection.error();
}

asio::awaitable<error_code> put_then_get(s3_client& s3, tracing::action& parent, std::string key, std::string body,
                                         std::string& back, diagnostics& diag) {
  co_await accept_cancellation();
  auto put = co_await s3.put_object(parent, "tls", key, std::span<const char>(body), diag);
  if (!put) co_return put.error();
  const body_sink sink = [&back](std::span<const char> chunk) {
    back.append(chunk.data(), chunk.size());
    return error_code{};
  };
  auto got = co_await s3.get_object(parent, "tls", key, sink, "", diag);
  co_return got ? error_code{} : got.error();
}

class tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir;
    ca_ = new test_ca(dir_->path());
    ca_->issue("server", "IP:127.0.0.1,DNS:localhost");
    ca_->issue("localhost-only", "DNS:localhost");
    ca_->issue("elsewhere", "DNS:elsewhere.invalid");
    moto_ = new test::moto_server(
        {.ssl_cert = ca_->cert("server"), .ssl_key = ca_->key("server"), .ca_bundle = ca_->bundle()});
    moto_->make_bucket("tls");  // by the aws CLI over https: the certificates work for an independent client
  }
  static void TearDownTestSuite() {
    delete moto_;
    delete ca_;
    delete dir_;
  }

  // ferry's defaults, pointed at moto over https by the name `host`.
  config::settings settings(const std::string& host, const std::string& ca_bundle) const {
    auto s = test::default_settings(dir.path());
    s.storage.endpoint = "https://" + host + ":" + std::to_string(moto_->port());
    s.storage.ca_bundle = ca_bundle;
    s.net.retry.base_delay = 1ms;
    return s;
  }

  // moto's credentials and region; ferry does not read AWS_CA_BUNDLE, and the tests must not depend on it.
  environment credentials() const {
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : moto_->environment())
      if (name != "AWS_CA_BUNDLE") vars[name] = value;
    return map_environment(vars);
  }

  asio::ssl::context& trusting(const std::string& ca_bundle) {
    diagnostics diag;
    auto made = make_tls_context(ca_bundle, diag);
    if (!made) throw std::runtime_error(diag.message);
    contexts.push_back(*made);
    return *contexts.back();
  }

  error_code handshake_with(const std::string& host, std::uint16_t port, diagnostics& diag) {
    return run_on(io, handshake({"https", host, port}, &trusting(ca_->bundle()), diag));
  }

  tracing::action& root() { return trace.root(); }

  // How many S3 request attempts the trace holds so far.
  std::size_t attempts_traced() { return trace.count(action_types::s3::request, "started"); }

  test::process_options cli_env(bool with_ca) const {
    auto o = moto_->process_env();
    o.env.erase("AWS_CA_BUNDLE");
    o.env["AWS_ENDPOINT_URL"] = "https://localhost:" + std::to_string(moto_->port());
    o.env["HOME"] = dir.path().string();
    o.env["XDG_STATE_HOME"] = (dir / "state").string();
    o.env["XDG_CONFIG_HOME"] = (dir / "config").string();
    o.env["FERRY_NET_RETRY_BASE_DELAY"] = "1ms";
    if (with_ca) o.env["FERRY_STORAGE_CA_BUNDLE"] = ca_->bundle();
    return o;
  }

  bool stored(const std::string& key) const {
    return moto_->aws({"s3api", "head-object", "--bucket", "tls", "--key", key}).exit_code == 0;
  }

  static temp_dir* dir_;
  static test_ca* ca_;
  static test::moto_server* moto_;
  temp_dir dir;
  asio::io_context io;
  cpu_pool cpu{1};
  std::vector<std::shared_ptr<asio::ssl::context>> contexts;
  test::trace_root trace{dir / "trace.jsonl", "test:tls"};
};

temp_dir* tls::dir_ = nullptr;
test_ca* tls::ca_ = nullptr;
test::moto_server* tls::moto_ = nullptr;

TEST_F(tls, an_s3_round_trip_over_https_works_with_the_ca_bundle) {
  diagnostics diag;
  auto session = open_s3_session(io.get_executor(), cpu, settings("localhost", ca_->bundle()), credentials(), diag);
  ASSERT_TRUE(session) << diag.message;
  ASSERT_TRUE(session->tls) << "an https endpoint needs a TLS context";
  std::string body(300'000, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 7919 % 251);
  std::string back;
  const auto ec = run_on(io, put_then_get(*session->s3, root(), "round-trip", body, back, diag));
  ASSERT_FALSE(ec) << ec.message() << ": " << diag.message;
  EXPECT_TRUE(back == body) << "the object came back different (" << back.size() << " bytes)";
  EXPECT_TRUE(stored("round-trip"));
}

TEST_F(tls, without_the_ca_bundle_the_certificate_cannot_be_verified_and_nothing_is_sent) {
  diagnostics diag;
  auto session = open_s3_session(io.get_executor(), cpu, settings("localhost", ""), credentials(), diag);
  ASSERT_TRUE(session) << diag.message;
  std::string back;
  const auto ec = run_on(io, put_then_get(*session->s3, root(), "untrusted", "secret bytes", back, diag));
  EXPECT_EQ(ec, errc::tls_failed) << ec.message();
  EXPECT_NE(diag.message.find("certificate could not be verified"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("localhost"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("storage.ca_bundle"), std::string::npos) << "the way out: " << diag.message;
  // Trying again cannot make an untrusted certificate trusted.
  EXPECT_EQ(attempts_traced(), 1u);
  EXPECT_FALSE(stored("untrusted"));
}

TEST_F(tls, the_cli_fails_with_exit_1_without_the_ca_bundle_and_works_with_it) {
  dir.write("f", "bytes over https");
  const auto without = test::run_ferry({"storage", "cp", (dir / "f").string(), "s3://tls/cli"}, cli_env(false));
  EXPECT_EQ(without.exit_code, 1) << without.err;
  EXPECT_NE(without.err.find("certificate could not be verified"), std::string::npos) << without.err;
  EXPECT_FALSE(stored("cli"));

  const auto with = test::run_ferry({"storage", "cp", (dir / "f").string(), "s3://tls/cli"}, cli_env(true));
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(moto_->aws({"s3", "cp", "s3://tls/cli", (dir / "back").string()}).exit_code, 0);
  EXPECT_EQ(test::read_file(dir / "back"), "bytes over https");
}

TEST_F(tls, a_certificate_that_does_not_name_the_host_fails_the_host_name_check) {
  tls_server server(dir / "s_server.log", {"-cert", ca_->cert("localhost-only"), "-key", ca_->key("localhost-only")});
  diagnostics diag;
  // The certificate names localhost only: reached as 127.0.0.1 it must be refused, though our CA signed it.
  EXPECT_EQ(handshake_with("127.0.0.1", server.port(), diag), errc::tls_failed);
  EXPECT_NE(diag.message.find("127.0.0.1"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("mismatch"), std::string::npos) << diag.message;
  diagnostics by_name;
  EXPECT_FALSE(handshake_with("localhost", server.port(), by_name)) << by_name.message;
}

TEST_F(tls, the_client_sends_the_host_name_by_sni) {
  // s_server shows the certificate for localhost only to a client that asks for localhost by SNI, and
  // one for another name to any other.
  tls_server server(dir / "s_server.log", {"-cert", ca_->cert("elsewhere"), "-key", ca_->key("elsewhere"),
                                           "-servername", "localhost", "-cert2", ca_->cert("localhost-only"), "-key2",
                                           ca_->key("localhost-only")});
  // The premise, checked with openssl's own client: without SNI the certificate does not fit.
  const auto s_client = [&](std::vector<std::string> sni) {
    std::vector<std::string> argv{"openssl", "s_client", "-connect", "localhost:" + std::to_string(server.port()),
                                  "-CAfile", ca_->bundle(), "-verify_hostname", "localhost", "-verify_return_error",
                                  "-brief"};
    argv.insert(argv.end(), sni.begin(), sni.end());
    return test::run(argv).exit_code;
  };
  ASSERT_NE(s_client({"-noservername"}), 0);
  ASSERT_EQ(s_client({"-servername", "localhost"}), 0);

  diagnostics diag;
  EXPECT_FALSE(handshake_with("localhost", server.port(), diag)) << diag.message;
}

TEST_F(tls, a_ca_bundle_that_does_not_exist_is_an_error_naming_storage_ca_bundle) {
  const auto missing = (dir / "no-such-ca.pem").string();
  diagnostics diag;
  auto session = open_s3_session(io.get_executor(), cpu, settings("localhost", missing), credentials(), diag);
  ASSERT_FALSE(session);
  EXPECT_EQ(session.error(), errc::tls_failed);
  EXPECT_NE(diag.message.find("storage.ca_bundle"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find(missing), std::string::npos) << diag.message;

  auto o = cli_env(true);
  o.env["FERRY_STORAGE_CA_BUNDLE"] = missing;
  dir.write("f", "x");
  const auto r = test::run_ferry({"storage", "cp", (dir / "f").string(), "s3://tls/missing-ca"}, o);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("storage.ca_bundle"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ferry::net
