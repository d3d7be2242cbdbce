#pragma once
// The ec2 provider: nodes are EC2 instances, one RunInstances per node so that each gets its own Name
// and ferry:node-id tags at launch (and a ClientToken, so a retried launch cannot start a second
// machine). Every instance is tagged ferry:managed=true, which is how list() finds them.
//
// - create: the type is spec.instance_type, else ec2.instance_type, else the cheapest in the catalogue
//   meeting the minimums (a spec's 0 or false falls back to ec2.min_cpus, ec2.min_memory_gib,
//   ec2.spot). ferry's public key is imported once as key pair "ferry-<16 hex of its SHA-256>" (an
//   existing pair of that name is the same key). If one launch of several fails, the instances already
//   started are terminated and create fails.
// - describe: EC2's state, mapped pending/running/stopping/stopped, and shutting-down or terminated as
//   terminated; host is the private or public IP (ec2.address). Right after a launch, EC2 may not list
//   an instance for a few seconds: describe then fails with node_not_found, and callers poll again.
// - terminate: TerminateInstances; an instance EC2 no longer knows counts as terminated. An instance that
//   shuts itself down (its idle watchdog) is terminated by EC2: it launches with
//   InstanceInitiatedShutdownBehavior=terminate.
// - list: ferry:managed instances that are not (being) terminated.
//
// A node's id is its instance id; details hold instance_type, availability_zone, spot, price (USD per
// hour, an estimate for on-demand: see on_demand_prices.hpp), price_source, subnet_id, vpc_id, image_id,
// private_ip, public_ip and node_tag (the ferry:node-id tag).
#include "config/settings.hpp"
#include "net/aws_profile.hpp"
#include "net/http_client.hpp"
#include "provision/ec2/catalogue_store.hpp"
#include "provision/ec2/client.hpp"
#include "provision/provider.hpp"

#include <memory>
#include <string>

namespace ferry::provision::ec2 {

// What talking to EC2 needs, built once: the TLS context for https endpoints (storage.ca_bundle adds
// trusted CAs, as for S3), the connection pool and the client with its endpoint, region and credentials.
struct session {
  std::shared_ptr<asio::ssl::context> tls;
  std::unique_ptr<net::http_client> http;
  std::unique_ptr<client> api;
};

result<session> open_session(asio::any_io_executor io, const config::settings& settings, const net::environment& env,
                             diagnostics& diag);

// "ferry-" and 16 hex digits of the SHA-256 of the key's base64 blob: the same key, the same name.
std::string key_pair_name(std::string_view public_key);

// EC2's instance state name as a node state.
node_state state_of(std::string_view ec2_state);

class ec2_provider final : public provider {
 public:
  // `public_key` is ferry's OpenSSH public key line; empty: nodes launch without a key pair (the AMI
  // must let ferry in some other way). `clock` (empty: the system clock) times the catalogue cache.
  ec2_provider(session s, const config::settings& settings, std::string public_key, clock_fn clock = {});

  std::string_view name() const override { return "ec2"; }

  asio::awaitable<result<std::vector<node>>> create(tracing::action& parent, const node_spec& spec,
                                                    diagnostics& diag) override;
  asio::awaitable<result<node>> describe(tracing::action& parent, const node& n, diagnostics& diag) override;
  asio::awaitable<result<void>> terminate(tracing::action& parent, const node& n, diagnostics& diag) override;
  asio::awaitable<result<std::vector<node>>> list(tracing::action& parent, diagnostics& diag) override;
  // Shuts the machine down; instances launch with InstanceInitiatedShutdownBehavior=terminate, so an
  // idle node ends for good and stops costing money.
  std::string self_stop_command(const node& n) const override;

  // The type a spec launches as, with its price (from the catalogue unless a type is named).
  asio::awaitable<result<choice>> choose_type(tracing::action& parent, const node_spec& spec, diagnostics& diag);

  catalogue_store& catalogue_cache() { return catalogue_; }
  client& api() { return *session_.api; }

 private:
  struct launched;  // one launch's outcome
  asio::awaitable<result<std::vector<node>>> create_in(tracing::action& act, const node_spec& spec,
                                                       diagnostics& diag);
  asio::awaitable<result<void>> ensure_key_pair(tracing::action& act, diagnostics& diag);
  asio::awaitable<void> launch_one(tracing::action& act, const launch_request& request, launched& out);
  asio::awaitable<void> clean_up(tracing::action& act, const std::vector<std::string>& ids);
  launch_request launch_for(const choice& type, bool spot, const std::string& node_tag) const;
  node node_of(const instance& i) const;
  void update(node& n, const instance& i) const;

  session session_;
  config::ec2_settings ec2_;
  std::string public_key_;
  std::string key_name_;
  bool key_imported_ = false;
  catalogue_store catalogue_;
};

}  // namespace ferry::provision::ec2
