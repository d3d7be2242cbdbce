#include "provision/ec2/ec2_provider.hpp"

#include "net/digest.hpp"
#include "net/iso_time.hpp"
#include "net/run_all.hpp"
#include "net/s3_session.hpp"
#include "net/tls_context.hpp"
#include "provision/error.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <ctime>
#include <random>

namespace ferry::provision::ec2 {
namespace {

constexpr std::string_view managed_tag = "ferry:managed";
constexpr std::string_view node_id_tag = "ferry:node-id";

std::string tag_or(const instance& i, const std::string& key, const std::string& fallback) {
  const auto it = i.tags.find(key);
  return it == i.tags.end() || it->second.empty() ? fallback : it->second;
}

// "2024-05-01T12:00:00.000Z" as unix seconds; 0 when it is not such a time.
std::int64_t unix_time(const std::string& iso) { return net::unix_seconds_of(iso).value_or(0); }

// Eight random hex digits shared by the nodes of one create: their tags and ClientTokens.
std::string launch_id() {
  std::random_device random;
  return fmt::format("{:08x}", random());
}

std::string ids_text(const std::vector<std::string>& ids) { return fmt::format("{}", fmt::join(ids, ", ")); }

}  // namespace

// ---------------------------------------------------------------------------------------------

result<session> open_session(asio::any_io_executor io, const config::settings& settings, const net::environment& env,
                             diagnostics& diag) {
  auto where = resolve_target(settings.ec2, env, diag);
  if (!where) return where.error();
  session s;
  if (where->at.scheme == "https") {
    auto tls = net::make_tls_context(settings.storage.ca_bundle, diag);
    if (!tls) return tls.error();
    s.tls = *tls;
  }
  s.http = std::make_unique<net::http_client>(io, net::http_settings(settings.net), s.tls);
  s.api = std::make_unique<client>(*s.http, std::move(*where), settings.net.retry);
  return s;
}

std::string key_pair_name(std::string_view public_key) {
  // "ssh-ed25519 AAAA... comment": the blob alone, so a changed comment is the same key.
  std::string_view blob = public_key;
  if (const auto space = blob.find(' '); space != std::string_view::npos) {
    blob.remove_prefix(space + 1);
    blob = blob.substr(0, blob.find(' '));
  }
  return "ferry-" + net::hex_sha256(blob).substr(0, 16);
}

node_state state_of(std::string_view ec2_state) {
  if (ec2_state == "pending") return node_state::pending;
  if (ec2_state == "running") return node_state::running;
  if (ec2_state == "stopping") return node_state::stopping;
  if (ec2_state == "stopped") return node_state::stopped;
  // A shutting-down instance never comes back: for ferry it is gone already.
  if (ec2_state == "shutting-down" || ec2_state == "terminated") return node_state::terminated;
  return node_state::unknown;
}

// ---------------------------------------------------------------------------------------------

struct ec2_provider::launched {
  std::optional<instance> started;
  error_code ec;
  diagnostics diag;
};

ec2_provider::ec2_provider(session s, const config::settings& settings, std::string public_key, clock_fn clock)
    : session_(std::move(s)), ec2_(settings.ec2), public_key_(std::move(public_key)),
      key_name_(public_key_.empty() ? std::string() : key_pair_name(public_key_)),
      catalogue_(*session_.api, settings.dirs.cache, settings.ec2.catalogue_ttl, std::move(clock)) {
  if (ec2_.user.empty()) ec2_.user = settings.ssh.user;
}

void ec2_provider::update(node& n, const instance& i) const {
  n.state = state_of(i.state);
  n.host = ec2_.address == "public" ? i.public_ip : i.private_ip;
  auto& d = n.details;
  d["instance_type"] = i.type;
  d["availability_zone"] = i.availability_zone;
  d["spot"] = i.lifecycle == "spot";
  d["subnet_id"] = i.subnet_id;
  d["vpc_id"] = i.vpc_id;
  d["image_id"] = i.image_id;
  d["private_ip"] = i.private_ip;
  d["public_ip"] = i.public_ip;
  d["ec2_state"] = i.state;
  if (!i.state_reason.empty()) d["state_reason"] = i.state_reason;
  if (const auto it = i.tags.find(std::string(node_id_tag)); it != i.tags.end()) d["node_tag"] = it->second;
}

node ec2_provider::node_of(const instance& i) const {
  node n;
  n.id = i.id;
  n.provider = "ec2";
  n.name = tag_or(i, "Name", i.id);
  n.user = ec2_.user;
  n.created_at = unix_time(i.launch_time);
  update(n, i);
  return n;
}

launch_request ec2_provider::launch_for(const choice& type, bool spot, const std::string& node_tag) const {
  launch_request r;
  r.image_id = ec2_.ami;
  r.instance_type = type.type;
  r.subnet_id = ec2_.subnet_id;
  r.security_group_ids = ec2_.security_group_ids;
  r.key_name = key_name_;
  r.client_token = node_tag;
  r.spot = spot;
  r.tags = {{std::string(managed_tag), "true"}, {std::string(node_id_tag), node_tag}, {"Name", node_tag}};
  return r;
}

asio::awaitable<result<choice>> ec2_provider::choose_type(tracing::action& parent, const node_spec& spec,
                                                          diagnostics& diag) {
  const bool spot = spec.spot || ec2_.spot;
  const std::string named = spec.instance_type.value_or(ec2_.instance_type);
  if (!named.empty()) co_return choice{named, 0, 0, std::nullopt, "none", {}};
  auto known = co_await catalogue_.get(parent, diag);
  if (!known) co_return known.error();
  requirements need;
  need.min_cpus = spec.min_cpus > 0 ? spec.min_cpus : ec2_.min_cpus;
  need.min_memory_gib = spec.min_memory_gib > 0 ? spec.min_memory_gib : ec2_.min_memory_gib;
  need.spot = spot;
  need.architecture = ec2_.architecture;
  co_return cheapest(*known, need, diag);
}

asio::awaitable<result<void>> ec2_provider::ensure_key_pair(tracing::action& act, diagnostics& diag) {
  if (key_name_.empty() || key_imported_) co_return result<void>{};
  auto imported = co_await api().import_key_pair(act, key_name_, public_key_, diag);
  // The name is derived from the key, so a pair of that name holds this very key.
  if (!imported && imported.error() != make_error_code(errc::already_exists)) co_return imported.error();
  diag.clear();
  key_imported_ = true;
  co_return result<void>{};
}

asio::awaitable<void> ec2_provider::launch_one(tracing::action& act, const launch_request& request, launched& out) {
  co_await net::accept_cancellation();
  auto r = co_await api().run_instance(act, request, out.diag);
  if (r)
    out.started = std::move(*r);
  else
    out.ec = r.error();
}

asio::awaitable<void> ec2_provider::clean_up(tracing::action& act, const std::vector<std::string>& ids) {
  if (ids.empty()) co_return;
  diagnostics ignored;  // the launch failure is what the caller needs to hear about
  auto cleanup = act.child(action_types::ec2::clean_up, {{"instances", ids_text(ids)}});
  auto r = co_await api().terminate_instances(cleanup, ids, ignored);
  cleanup.finish(r, ignored);
}

asio::awaitable<result<std::vector<node>>> ec2_provider::create_in(tracing::action& act, const node_spec& spec,
                                                                   diagnostics& diag) {
  if (ec2_.ami.empty()) {
    diag.set("ec2.ami is not set: name the AMI that EC2 nodes boot (ec2.ami = \"ami-...\" in ferry.toml, or "
             "FERRY_EC2_AMI)");
    co_return make_error_code(errc::bad_node_config);
  }
  if (spec.count < 1) co_return std::vector<node>{};
  auto type = co_await choose_type(act, spec, diag);
  if (!type) co_return type.error();
  act.log(action_types::ec2::type_chosen,
          {{"instance_type", type->type}, {"price", type->price.value_or(0)}, {"price_source", type->price_source}});
  auto keyed = co_await ensure_key_pair(act, diag);
  if (!keyed) co_return keyed.error();

  const bool spot = spec.spot || ec2_.spot;
  const auto batch = launch_id();
  std::vector<launch_request> requests;
  std::vector<launched> outcomes(static_cast<std::size_t>(spec.count));
  for (int i = 1; i <= spec.count; ++i)
    requests.push_back(launch_for(*type, spot, fmt::format("ferry-{}-{}", batch, i)));
  std::vector<asio::awaitable<void>> launches;
  for (std::size_t i = 0; i < requests.size(); ++i) launches.push_back(launch_one(act, requests[i], outcomes[i]));
  co_await net::run_all(std::move(launches));

  std::vector<node> nodes;
  std::vector<std::string> started;
  const launched* failed = nullptr;
  for (const auto& o : outcomes) {
    if (o.started) {
      started.push_back(o.started->id);
      nodes.push_back(node_of(*o.started));
      if (type->price) nodes.back().details["price"] = *type->price;
      nodes.back().details["price_source"] = type->price_source;
    } else if (!failed) {
      failed = &o;
    }
  }
  if (!failed) co_return nodes;
  co_await clean_up(act, started);
  diag = failed->diag;
  if (!started.empty())
    diag.message += fmt::format(" (terminated the instances already started: {})", ids_text(started));
  co_return result<std::vector<node>>(boost::system::in_place_error, failed->ec);
}

asio::awaitable<result<std::vector<node>>> ec2_provider::create(tracing::action& parent, const node_spec& spec,
                                                                diagnostics& diag) {
  auto act = parent.child(action_types::ec2::create, {{"count", spec.count}});
  auto r = co_await create_in(act, spec, diag);
  act.finish(r, diag, {{"created", r ? r->size() : std::size_t{0}}});
  co_return r;
}

asio::awaitable<result<node>> ec2_provider::describe(tracing::action& parent, const node& n, diagnostics& diag) {
  auto act = parent.child(action_types::ec2::describe, {{"node", n.id}});
  const std::vector<std::string> ids{n.id};
  const std::vector<filter> none;
  auto found = co_await api().describe_instances(act, ids, none, diag);
  if (found && found->empty()) {
    diag.set(fmt::format("DescribeInstances does not list {} (EC2 may not list an instance for a few seconds "
                         "after its launch)", n.id));
    found = result<std::vector<instance>>(boost::system::in_place_error, make_error_code(errc::node_not_found));
  }
  act.finish(found, diag);
  if (!found) co_return found.error();
  node out = n;
  update(out, found->front());
  co_return out;
}

asio::awaitable<result<void>> ec2_provider::terminate(tracing::action& parent, const node& n, diagnostics& diag) {
  auto act = parent.child(action_types::ec2::terminate, {{"node", n.id}});
  const std::vector<std::string> ids{n.id};
  auto r = co_await api().terminate_instances(act, ids, diag);
  // An instance EC2 no longer knows ended long enough ago to be forgotten.
  const bool gone = !r && r.error() == make_error_code(errc::node_not_found);
  if (gone) diag.clear();
  act.finish(gone ? error_code{} : (r ? error_code{} : r.error()), diag, {{"already_gone", gone}});
  if (!r && !gone) co_return r.error();
  co_return result<void>{};
}

std::string ec2_provider::self_stop_command(const node&) const {
  // sudo -n: a login user without passwordless sudo fails at once rather than wait for a password.
  return "if [ \"$(id -u)\" = 0 ]; then shutdown -h now; else sudo -n shutdown -h now; fi";
}

asio::awaitable<result<std::vector<node>>> ec2_provider::list(tracing::action& parent, diagnostics& diag) {
  auto act = parent.child(action_types::ec2::list);
  const std::vector<std::string> no_ids;
  const std::vector<filter> managed = {{"tag:" + std::string(managed_tag), {"true"}},
                                       {"instance-state-name", {"pending", "running", "stopping", "stopped"}}};
  auto found = co_await api().describe_instances(act, no_ids, managed, diag);
  act.finish(found, diag, {{"found", found ? found->size() : std::size_t{0}}});
  if (!found) co_return found.error();
  std::vector<node> nodes;
  for (const auto& i : *found) {
    if (state_of(i.state) != node_state::terminated) nodes.push_back(node_of(i));
  }
  co_return nodes;
}

}  // namespace ferry::provision::ec2
