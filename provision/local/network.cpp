#include "provision/local/network.hpp"

#include "provision/error.hpp"
#include "tracing/action_types.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

namespace ferry::provision::local {
namespace {

namespace asio = boost::asio;

constexpr std::uint16_t bridge_index = 1;  // 10.200.0.1

// How `ip` says that what it was to create is there already (the wording of iproute2 6.1 and of older ones),
// and that what it was to delete is gone.
const std::vector<std::string_view> exists_already = {"File exists", "already assigned"};
const std::vector<std::string_view> netns_gone = {"No such file"};
// "No such device": the link was there when `ip` looked it up and gone when it asked the kernel to delete
// it (the namespace that held its peer is cleaned up asynchronously); seen with 64 nodes ending at once.
const std::vector<std::string_view> link_gone = {"Cannot find device", "No such device"};
const std::vector<std::string_view> no_failure_tolerated;

std::optional<std::uint32_t> parse_ipv4(std::string_view address) {
  in_addr a{};
  const std::string text(address);
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

}  // namespace

std::optional<std::uint16_t> node_index(std::string_view address) {
  const auto ip = parse_ipv4(address);
  if (!ip || (*ip >> 16) != ((10u << 8) | 200u)) return std::nullopt;
  const auto index = static_cast<std::uint16_t>(*ip & 0xffff);
  const auto low = index & 0xff;
  if (index == bridge_index || low == 0 || low == 0xff) return std::nullopt;
  return index;
}

std::string node_address(std::uint16_t index) { return fmt::format("10.200.{}.{}", index >> 8, index & 0xff); }

std::string veth_name(std::uint16_t index) { return fmt::format("ferryv-{:04x}", index); }

std::string netns_name(std::string_view node_id) { return fmt::format("ferry-{}", node_id); }

std::vector<std::uint16_t> candidate_indexes(std::string_view seed, std::size_t count) {
  std::vector<std::uint16_t> out;
  auto index = static_cast<std::uint16_t>(std::hash<std::string_view>{}(seed));
  for (std::size_t tried = 0; out.size() < count && tried < 65536; ++tried, ++index) {
    if (node_index(node_address(index))) out.push_back(index);
  }
  return out;
}

asio::awaitable<result<command_result>> run_ip(tracing::action& act, const std::vector<std::string>& args,
                                               std::chrono::milliseconds timeout, diagnostics& diag,
                                               const std::vector<std::string_view>& tolerated) {
  std::vector<std::string> argv{"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto ran = co_await run_command(argv, timeout, diag);
  if (!ran) co_return ran;
  act.log(action_types::local::command, {{"command", command_line(argv)}, {"exit_code", ran->exit_code}});
  const bool tolerable = std::any_of(tolerated.begin(), tolerated.end(),
                                     [&](std::string_view t) { return ran->err.find(t) != std::string::npos; });
  if (ran->exit_code != 0 && !tolerable) {
    diag.set(fmt::format("{} failed: {}", command_line(argv), trimmed(ran->err)));
    co_return make_error_code(errc::local_setup_failed);
  }
  co_return ran;
}

asio::awaitable<result<void>> ensure_bridge(tracing::action& act, std::chrono::milliseconds timeout,
                                            diagnostics& diag) {
  const std::string bridge(bridge_name);
  const auto with_prefix = fmt::format("{}/{}", bridge_address, prefix_length);
  const std::vector<std::vector<std::string>> steps = {
      {"link", "add", bridge, "type", "bridge"},
      {"addr", "add", with_prefix, "dev", bridge},
      {"link", "set", bridge, "up"},
  };
  for (const auto& step : steps) {
    auto ran = co_await run_ip(act, step, timeout, diag, exists_already);
    if (!ran) co_return ran.error();
  }
  co_return result<void>{};
}

asio::awaitable<result<bool>> claim_address(tracing::action& act, const std::string& netns, std::uint16_t index,
                                            std::chrono::milliseconds timeout, diagnostics& diag) {
  const std::vector<std::string> add_netns{"netns", "add", netns};
  auto made = co_await run_ip(act, add_netns, timeout, diag, exists_already);
  if (!made) co_return result<bool>(sys::in_place_error, made.error());
  const std::vector<std::string> add_veth{"link", "add", veth_name(index), "type", "veth", "peer", "name", "eth0",
                                          "netns", netns};
  auto ran = co_await run_ip(act, add_veth, timeout, diag, exists_already);
  if (!ran) co_return result<bool>(sys::in_place_error, ran.error());
  co_return ran->exit_code == 0;
}

asio::awaitable<result<void>> configure_node_link(tracing::action& act, const std::string& netns, std::uint16_t index,
                                                  std::chrono::milliseconds timeout, diagnostics& diag) {
  const auto with_prefix = fmt::format("{}/{}", node_address(index), prefix_length);
  const std::vector<std::vector<std::string>> steps = {
      {"link", "set", veth_name(index), "master", std::string(bridge_name), "up"},
      {"-n", netns, "addr", "add", with_prefix, "dev", "eth0"},
      {"-n", netns, "link", "set", "eth0", "up"},
      {"-n", netns, "link", "set", "lo", "up"},
      {"-n", netns, "route", "add", "default", "via", std::string(bridge_address)},
  };
  for (const auto& step : steps) {
    auto ran = co_await run_ip(act, step, timeout, diag, no_failure_tolerated);
    if (!ran) co_return ran.error();
  }
  co_return result<void>{};
}

asio::awaitable<result<void>> remove_node_network(tracing::action& act, const std::string& netns,
                                                  const std::string& veth, std::chrono::milliseconds timeout,
                                                  diagnostics& diag) {
  if (!netns.empty()) {
    const std::vector<std::string> del{"netns", "del", netns};
    auto ran = co_await run_ip(act, del, timeout, diag, netns_gone);
    if (!ran) co_return ran.error();
  }
  if (!veth.empty()) {
    // Usually gone with the namespace that held its peer.
    const std::vector<std::string> del{"link", "del", veth};
    auto ran = co_await run_ip(act, del, timeout, diag, link_gone);
    if (!ran) co_return ran.error();
  }
  co_return result<void>{};
}

std::string loopback_address(std::string_view seed) {
  const auto h = std::hash<std::string_view>{}(seed);
  // 127.0.x.y with y in 2..254: never 127.0.0.1, where other services of the machine listen.
  return fmt::format("127.0.{}.{}", (h >> 8) & 0xff, 2 + (h & 0xff) % 253);
}

std::optional<std::uint16_t> free_port(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  socklen_t len = sizeof addr;
  std::optional<std::uint16_t> port;
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) == 1 &&
      ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace ferry::provision::local
