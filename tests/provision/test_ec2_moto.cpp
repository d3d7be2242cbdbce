// The ec2 provider and its catalogue against a real moto_server with SigV4 checking on, with the aws
// CLI as the independent judge of what EC2 holds: subnets, addresses, tags, key pairs and states.
#include "net/error.hpp"
#include "provision/ec2/ec2_provider.hpp"
#include "provision/error.hpp"

#include "support/moto.hpp"
#include "support/process.hpp"
#include "support/run_to_end.hpp"
#include "support/settings.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_root.hpp"
#include "tracing/action_types.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace ferry::provision::ec2 {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

constexpr std::string_view public_key =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILDKXXtHqgRNkbPWPw3anX1RPYqAYd92UQfeYhcK/snH ferry-test";
// An Amazon Linux 2 image moto knows in us-east-1.
constexpr std::string_view ami = "ami-04681a1dbd79675a5";

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class ec2_moto : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    moto_ = new test::moto_server({.auth = true});
    const auto vpc = aws_text({"ec2", "create-vpc", "--cidr-block", "10.200.0.0/16", "--query", "Vpc.VpcId"});
    subnet_ = aws_text({"ec2", "create-subnet", "--vpc-id", vpc, "--cidr-block", "10.200.0.0/24", "--query",
                        "Subnet.SubnetId"});
  }
  static void TearDownTestSuite() {
    delete moto_;
    moto_ = nullptr;
  }

  // The aws CLI's answer as text; throws when it fails.
  static std::string aws_text(std::vector<std::string> args) {
    args.insert(args.end(), {"--output", "text"});
    const auto r = moto_->aws(args);
    if (r.exit_code != 0) throw std::runtime_error("aws " + args[1] + ": " + r.err);
    return trimmed(r.out);
  }

  static json::value aws_json(std::vector<std::string> args) {
    args.insert(args.end(), {"--output", "json"});
    const auto r = moto_->aws(args);
    if (r.exit_code != 0) throw std::runtime_error("aws " + args[1] + ": " + r.err);
    return json::parse(r.out);
  }

  // ferry's defaults with the [ec2] a test needs. The endpoint comes the AWS way: AWS_ENDPOINT_URL.
  config::settings settings() const {
    auto s = test::default_settings(dir.path());
    s.ec2.ami = std::string(ami);
    s.ec2.subnet_id = subnet_;
    s.net.retry.base_delay = 1ms;
    return s;
  }

  net::environment environment(const std::map<std::string, std::string>& overrides = {}) const {
    std::map<std::string, std::string, std::less<>> vars;
    for (const auto& [name, value] : moto_->environment()) vars[name] = value;
    for (const auto& [name, value] : overrides) vars[name] = value;
    return net::map_environment(std::move(vars));
  }

  std::unique_ptr<ec2_provider> provider(const config::settings& s, const net::environment& env, clock_fn clock = {},
                                         int instances_per_page = 1000) {
    diagnostics diag;
    auto opened = open_session(io.get_executor(), s, env, diag);
    if (!opened) throw std::runtime_error(diag.message);
    opened->api = std::make_unique<client>(*opened->http, opened->api->where(), s.net.retry, instances_per_page);
    return std::make_unique<ec2_provider>(std::move(*opened), s, std::string(public_key), std::move(clock));
  }
  std::unique_ptr<ec2_provider> provider() { return provider(settings(), environment()); }

  template <class T>
  T run(asio::awaitable<T> work) {
    return test::run_to_end(io, std::move(work));
  }

  // How many attempts of an EC2 Action (its action type, action_types::ec2) the trace holds so far.
  int requests(std::string_view type) { return static_cast<int>(trace.count(type, "started")); }

  // The ids of the ferry:managed instances EC2 holds that are not terminated, as the aws CLI sees them.
  static std::set<std::string> managed_by_cli() {
    const auto text = aws_text({"ec2", "describe-instances", "--filters", "Name=tag:ferry:managed,Values=true",
                                "Name=instance-state-name,Values=pending,running", "--query",
                                "Reservations[].Instances[].InstanceId"});
    std::set<std::string> ids;
    std::istringstream in(text);
    for (std::string id; in >> id;) ids.insert(id);
    return ids;
  }

  static test::moto_server* moto_;
  static std::string subnet_;
  test::temp_dir dir;
  asio::io_context io;
  test::trace_root trace{dir / "trace.jsonl", "test:ec2"};
};

test::moto_server* ec2_moto::moto_ = nullptr;
std::string ec2_moto::subnet_;

// ---- the provider ---------------------------------------------------------------------------------

asio::awaitable<result<std::vector<node>>> create(ec2_provider& p, tracing::action& root, node_spec spec,
                                                  diagnostics& diag) {
  co_return co_await p.create(root, spec, diag);
}

asio::awaitable<result<node>> describe(ec2_provider& p, tracing::action& root, node n, diagnostics& diag) {
  co_return co_await p.describe(root, n, diag);
}

asio::awaitable<result<void>> terminate(ec2_provider& p, tracing::action& root, node n, diagnostics& diag) {
  co_return co_await p.terminate(root, n, diag);
}

asio::awaitable<result<std::vector<node>>> list(ec2_provider& p, tracing::action& root, diagnostics& diag) {
  co_return co_await p.list(root, diag);
}

std::set<std::string> ids_of(const std::vector<node>& nodes) {
  std::set<std::string> ids;
  for (const auto& n : nodes) ids.insert(n.id);
  return ids;
}

TEST_F(ec2_moto, three_nodes_start_in_the_subnet_tagged_and_keyed_then_terminate) {
  auto p = provider();
  diagnostics diag;
  auto made = run(create(*p, trace.root(), {.count = 3}, diag));
  ASSERT_TRUE(made) << made.error().message() << ": " << diag.message << moto_->log();
  ASSERT_EQ(made->size(), 3u);

  std::set<std::string> ids, addresses, tags;
  for (const auto& n : *made) {
    EXPECT_TRUE(n.id.starts_with("i-")) << n.id;
    EXPECT_EQ(n.provider, "ec2");
    EXPECT_TRUE(n.host.starts_with("10.200.0.")) << n.host;
    EXPECT_EQ(n.port, 22);
    EXPECT_EQ(n.user, "root") << "ec2.user defaults to ssh.user";
    EXPECT_TRUE(n.state == node_state::pending || n.state == node_state::running) << to_string(n.state);
    EXPECT_GT(n.created_at, 0);
    EXPECT_EQ(n.details.at("instance_type").as_string(), "c6a.large") << "the cheapest 2 vCPU / 4 GiB on demand";
    EXPECT_FALSE(n.details.at("spot").as_bool());
    EXPECT_DOUBLE_EQ(n.details.at("price").as_double(), 0.0765);
    EXPECT_FALSE(n.details.at("availability_zone").as_string().empty());
    EXPECT_EQ(n.details.at("node_tag").as_string(), n.name);
    ids.insert(n.id);
    addresses.insert(n.host);
    tags.insert(n.name);
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(addresses.size(), 3u);
  EXPECT_EQ(tags.size(), 3u);

  // What EC2 holds, through the aws CLI.
  std::vector<std::string> args = {"ec2", "describe-instances", "--instance-ids"};
  args.insert(args.end(), ids.begin(), ids.end());
  args.insert(args.end(), {"--query", "Reservations[].Instances[]"});
  const auto instances = aws_json(args).as_array();
  ASSERT_EQ(instances.size(), 3u);
  const auto key_name = key_pair_name(public_key);
  for (const auto& v : instances) {
    const auto& i = v.as_object();
    EXPECT_EQ(i.at("SubnetId").as_string(), subnet_);
    EXPECT_EQ(i.at("ImageId").as_string(), ami);
    EXPECT_EQ(i.at("KeyName").as_string(), key_name);
    EXPECT_EQ(i.at("InstanceType").as_string(), "c6a.large");
    const std::string ip(i.at("PrivateIpAddress").as_string());
    EXPECT_TRUE(ip.starts_with("10.200.0.")) << ip;
    EXPECT_TRUE(addresses.contains(ip)) << ip;
    std::map<std::string, std::string> t;
    for (const auto& tag : i.at("Tags").as_array())
      t[std::string(tag.at("Key").as_string())] = std::string(tag.at("Value").as_string());
    EXPECT_EQ(t["ferry:managed"], "true");
    EXPECT_TRUE(tags.contains(t["ferry:node-id"])) << t["ferry:node-id"];
    EXPECT_EQ(t["Name"], t["ferry:node-id"]);
    // A shutdown from inside (the node's idle watchdog) terminates it.
    EXPECT_EQ(aws_text({"ec2", "describe-instance-attribute", "--instance-id", std::string(i.at("InstanceId").as_string()),
                        "--attribute", "instanceInitiatedShutdownBehavior", "--query",
                        "InstanceInitiatedShutdownBehavior.Value"}),
              "terminate");
  }
  EXPECT_EQ(aws_text({"ec2", "describe-key-pairs", "--key-names", key_name, "--query", "KeyPairs[0].KeyName"}),
            key_name);

  for (const auto& n : *made) {
    auto now = run(describe(*p, trace.root(), n, diag));
    for (int i = 0; i < 50 && now && now->state == node_state::pending; ++i)
      now = run(describe(*p, trace.root(), n, diag));
    ASSERT_TRUE(now) << diag.message;
    EXPECT_EQ(now->state, node_state::running);
    EXPECT_EQ(now->host, n.host);
    EXPECT_EQ(now->details.at("price").as_double(), 0.0765) << "details from create survive describe";
  }

  auto listed = run(list(*p, trace.root(), diag));
  ASSERT_TRUE(listed) << diag.message;
  for (const auto& id : ids) EXPECT_TRUE(ids_of(*listed).contains(id)) << id;

  for (const auto& n : *made) {
    auto ended = run(terminate(*p, trace.root(), n, diag));
    ASSERT_TRUE(ended) << diag.message;
    auto gone = run(describe(*p, trace.root(), n, diag));
    ASSERT_TRUE(gone) << diag.message;
    EXPECT_EQ(gone->state, node_state::terminated);
  }
  listed = run(list(*p, trace.root(), diag));
  ASSERT_TRUE(listed) << diag.message;
  for (const auto& id : ids) EXPECT_FALSE(ids_of(*listed).contains(id)) << id;
  for (const auto& id : ids) EXPECT_FALSE(managed_by_cli().contains(id)) << id;
}

// An idle node shuts itself down: directly as root, else through sudo, which must not ask for a password.
TEST_F(ec2_moto, an_idle_node_shuts_itself_down_through_sudo_unless_root) {
  auto p = provider();
  const auto stop = p->self_stop_command(node{});
  test::temp_dir bin;
  for (const auto& [name, body] : {std::pair{"id", "echo \"$FAKE_UID\""}, std::pair{"sudo", "echo sudo \"$@\""},
                                   std::pair{"shutdown", "echo shutdown \"$@\""}}) {
    std::ofstream(bin / name) << "#!/bin/sh\n" << body << "\n";
    std::filesystem::permissions(bin / name, std::filesystem::perms::owner_all);
  }
  for (const auto& [uid, expected] : {std::pair{"0", "shutdown -h now\n"}, std::pair{"1000", "sudo -n shutdown -h now\n"}}) {
    test::process_options o;
    o.env["PATH"] = bin.path().string();
    o.env["FAKE_UID"] = uid;
    const auto r = test::run({"/bin/sh", "-c", stop}, o);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected) << "uid " << uid;
  }
}

TEST_F(ec2_moto, a_second_create_imports_no_key_again_and_a_spot_node_is_spot) {
  auto p = provider();
  diagnostics diag;
  node_spec spec{.count = 1, .spot = true};
  auto first = run(create(*p, trace.root(), spec, diag));
  ASSERT_TRUE(first) << diag.message;
  auto second = run(create(*p, trace.root(), spec, diag));
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::import_key_pair), 1);
  EXPECT_EQ(requests(action_types::ec2::run_instances), 2);

  // Another provider (another ferry command) imports again: moto answers InvalidKeyPair.Duplicate, and
  // that is success.
  auto other = provider();
  auto third = run(create(*other, trace.root(), spec, diag));
  ASSERT_TRUE(third) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::import_key_pair), 2);

  const auto& n = first->front();
  EXPECT_TRUE(n.details.at("spot").as_bool());
  EXPECT_EQ(n.details.at("price_source").as_string(), "spot price history");
  EXPECT_EQ(aws_text({"ec2", "describe-instances", "--instance-ids", n.id, "--query",
                      "Reservations[0].Instances[0].InstanceLifecycle"}),
            "spot");
  for (const auto* made : {&*first, &*second, &*third})
    ASSERT_TRUE(run(terminate(*p, trace.root(), made->front(), diag))) << diag.message;
}

TEST_F(ec2_moto, list_follows_describe_instances_pages) {
  auto s = settings();
  s.ec2.instance_type = "t3.micro";
  auto p = provider(s, environment(), {}, 5);
  diagnostics diag;
  auto made = run(create(*p, trace.root(), {.count = 7}, diag));
  ASSERT_TRUE(made) << diag.message;
  const int before = requests(action_types::ec2::describe_instances);
  auto listed = run(list(*p, trace.root(), diag));
  ASSERT_TRUE(listed) << diag.message;
  EXPECT_GE(requests(action_types::ec2::describe_instances) - before, 2)
      << "7 launches are 7 reservations: two pages of 5";
  for (const auto& n : *made) EXPECT_TRUE(ids_of(*listed).contains(n.id)) << n.id;
  EXPECT_EQ(ids_of(*listed), managed_by_cli());
  for (const auto& n : *made) ASSERT_TRUE(run(terminate(*p, trace.root(), n, diag))) << diag.message;
}

TEST_F(ec2_moto, a_named_type_skips_the_catalogue_and_the_public_address_is_used_when_asked) {
  auto s = settings();
  s.ec2.instance_type = "t3.nano";
  s.ec2.address = "public";
  s.ec2.subnet_id.clear();  // moto gives public addresses in the default VPC only
  s.ec2.user = "ec2-user";
  auto p = provider(s, environment());
  diagnostics diag;
  auto made = run(create(*p, trace.root(), {.count = 1}, diag));
  ASSERT_TRUE(made) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::describe_instance_types), 0);
  const auto& n = made->front();
  EXPECT_EQ(n.details.at("instance_type").as_string(), "t3.nano");
  EXPECT_EQ(n.user, "ec2-user");
  EXPECT_EQ(n.host, std::string(n.details.at("public_ip").as_string()));
  EXPECT_NE(n.host, std::string(n.details.at("private_ip").as_string()));
  ASSERT_TRUE(run(terminate(*p, trace.root(), n, diag))) << diag.message;
}

TEST_F(ec2_moto, a_wrong_secret_is_refused_with_a_clear_error_and_nothing_starts) {
  const auto before = managed_by_cli();
  auto s = settings();
  s.ec2.instance_type = "t3.micro";  // straight to ImportKeyPair and RunInstances
  auto p = provider(s, environment({{"AWS_SECRET_ACCESS_KEY", "not-the-secret"}}));
  diagnostics diag;
  auto made = run(create(*p, trace.root(), {.count = 2}, diag));
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error(), make_error_code(net::errc::access_denied)) << made.error().message();
  // EC2 (and moto for EC2) says AuthFailure for a signature that does not match.
  EXPECT_NE(diag.message.find("AuthFailure"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("ImportKeyPair"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("secret access key"), std::string::npos) << diag.message;
  EXPECT_EQ(diag.message.find("not-the-secret"), std::string::npos) << "the secret itself must never be shown";
  EXPECT_EQ(trace.flushed_text().find("not-the-secret"), std::string::npos) << "nor traced";
  EXPECT_EQ(requests(action_types::ec2::run_instances), 0) << "the key import failed first";
  EXPECT_EQ(managed_by_cli(), before);
}

TEST_F(ec2_moto, a_missing_ami_names_the_key_and_sends_nothing) {
  auto s = settings();
  s.ec2.ami.clear();
  auto p = provider(s, environment());
  diagnostics diag;
  auto made = run(create(*p, trace.root(), {.count = 1}, diag));
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error(), make_error_code(errc::bad_node_config));
  EXPECT_NE(diag.message.find("ec2.ami"), std::string::npos) << diag.message;
  for (const auto type : {action_types::ec2::describe_instance_types, action_types::ec2::describe_spot_price_history,
                          action_types::ec2::import_key_pair, action_types::ec2::run_instances})
    EXPECT_EQ(requests(type), 0) << type;
}

TEST_F(ec2_moto, a_refused_launch_carries_ec2s_words_and_leaves_nothing_running) {
  const auto before = managed_by_cli();
  auto s = settings();
  s.ec2.subnet_id = "subnet-00000000000000000";
  s.ec2.instance_type = "t3.micro";
  auto p = provider(s, environment());
  diagnostics diag;
  auto made = run(create(*p, trace.root(), {.count = 2}, diag));
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error(), make_error_code(errc::provider_failed)) << made.error().message();
  EXPECT_NE(diag.message.find("RunInstances"), std::string::npos) << diag.message;
  EXPECT_NE(diag.message.find("InvalidSubnetID.NotFound"), std::string::npos) << diag.message;
  EXPECT_EQ(managed_by_cli(), before);
}

TEST_F(ec2_moto, an_unknown_instance_terminates_as_gone_and_cannot_be_described) {
  auto p = provider();
  node ghost;
  ghost.id = "i-0123456789abcdef0";
  diagnostics diag;
  EXPECT_TRUE(run(terminate(*p, trace.root(), ghost, diag))) << diag.message;
  auto described = run(describe(*p, trace.root(), ghost, diag));
  ASSERT_FALSE(described);
  EXPECT_EQ(described.error(), make_error_code(errc::node_not_found));
  EXPECT_NE(diag.message.find("i-0123456789abcdef0"), std::string::npos) << diag.message;
}

// ---- the catalogue --------------------------------------------------------------------------------

asio::awaitable<result<catalogue>> catalogue_of(ec2_provider& p, tracing::action& root, diagnostics& diag) {
  co_return co_await p.catalogue_cache().get(root, diag);
}

asio::awaitable<result<choice>> choose(ec2_provider& p, tracing::action& root, node_spec spec, diagnostics& diag) {
  co_return co_await p.choose_type(root, spec, diag);
}

TEST_F(ec2_moto, the_catalogue_is_fetched_once_then_read_from_disk_until_its_ttl_passes) {
  auto now = std::chrono::system_clock::now();
  const auto s = settings();
  auto p = provider(s, environment(), [&now] { return now; });
  diagnostics diag;
  auto first = run(catalogue_of(*p, trace.root(), diag));
  ASSERT_TRUE(first) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::describe_instance_types), 1);
  EXPECT_EQ(requests(action_types::ec2::describe_spot_price_history), 1);
  EXPECT_GT(first->offers.size(), 500u) << "moto knows over a thousand types";
  EXPECT_EQ(first->region, "us-east-1");
  const auto file = s.dirs.cache / "ec2-catalogue-us-east-1.json";
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(p->catalogue_cache().file(), file);

  // Within the TTL, from disk, also for another provider (another ferry command).
  now += 3h + 59min;
  auto again = provider(s, environment(), [&now] { return now; });
  auto second = run(catalogue_of(*again, trace.root(), diag));
  ASSERT_TRUE(second) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::describe_instance_types), 1);
  EXPECT_EQ(requests(action_types::ec2::describe_spot_price_history), 1);
  EXPECT_EQ(second->offers.size(), first->offers.size());
  EXPECT_EQ(second->fetched_at, first->fetched_at);

  now += 2min;  // 4h01m after the fetch
  auto third = run(catalogue_of(*p, trace.root(), diag));
  ASSERT_TRUE(third) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::describe_instance_types), 2);
  EXPECT_EQ(requests(action_types::ec2::describe_spot_price_history), 2);
  EXPECT_GT(third->fetched_at, first->fetched_at);

  // A damaged file is refetched and rewritten, not an error.
  std::ofstream(file, std::ios::trunc) << "{ damaged";
  auto fourth = run(catalogue_of(*p, trace.root(), diag));
  ASSERT_TRUE(fourth) << diag.message;
  EXPECT_EQ(requests(action_types::ec2::describe_instance_types), 3);
  EXPECT_TRUE(catalogue_from_json(test::read_file(file)));
}

TEST_F(ec2_moto, the_cheapest_type_for_a_spec_comes_from_moto_catalogue) {
  auto p = provider();
  diagnostics diag;
  auto on_demand = run(choose(*p, trace.root(), {.min_cpus = 4, .min_memory_gib = 8}, diag));
  ASSERT_TRUE(on_demand) << diag.message;
  EXPECT_EQ(on_demand->type, "c6a.xlarge");
  EXPECT_DOUBLE_EQ(*on_demand->price, 0.153);

  // moto prices every spot type alike ($0.00001): the smallest that fits wins.
  auto spot = run(choose(*p, trace.root(), {.min_cpus = 4, .min_memory_gib = 8, .spot = true}, diag));
  ASSERT_TRUE(spot) << diag.message;
  EXPECT_EQ(spot->vcpus, 4);
  EXPECT_EQ(spot->memory_mib, 8192);
  EXPECT_DOUBLE_EQ(*spot->price, 0.00001);
  EXPECT_EQ(requests(action_types::ec2::describe_instance_types), 1) << "one fetch serves both";
}

TEST_F(ec2_moto, no_type_meets_a_spec_beyond_every_machine) {
  auto p = provider();
  diagnostics diag;
  auto pick = run(choose(*p, trace.root(), {.min_cpus = 100000, .min_memory_gib = 1}, diag));
  ASSERT_FALSE(pick);
  EXPECT_EQ(pick.error(), make_error_code(errc::no_matching_type));
  EXPECT_NE(diag.message.find("at least 100000 vCPUs"), std::string::npos) << diag.message;
  auto made = run(create(*p, trace.root(), {.count = 1, .min_cpus = 100000}, diag));
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error(), make_error_code(errc::no_matching_type));
  EXPECT_EQ(requests(action_types::ec2::run_instances), 0);
}

}  // namespace
}  // namespace ferry::provision::ec2
