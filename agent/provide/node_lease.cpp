#include "agent/provide/node_lease.hpp"

#include "agent/error.hpp"
#include "agent/node/lease_watch.hpp"
#include "net/exec_streams.hpp"
#include "net/shell_quote.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace ferry::agent {
namespace {

// lease-set's exit when the node holds a later expiry already (agent/node/lease_run.hpp).
constexpr int kept_later = 3;

void check_id(std::string_view lease_id) {
  if (!node::lease_id_valid(lease_id))
    throw std::invalid_argument(fmt::format("not a lease id (letters, digits and '-' only): {}", lease_id));
}

// The lease file as a word for the node's sh: the id needs no quoting.
std::string lease_file_word(const std::string& cache_dir, std::string_view lease_id) {
  check_id(lease_id);
  return fmt::format("{}/leases/{}", node_cache_word(cache_dir), lease_id);
}

std::string trimmed(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

std::string lease_file(const std::string& cache_dir, std::string_view lease_id) {
  check_id(lease_id);
  return fmt::format("{}/leases/{}", cache_dir.empty() ? std::string("${XDG_CACHE_HOME:-$HOME/.cache}/ferry") : cache_dir,
                     lease_id);
}

asio::awaitable<result<void>> set_node_lease(tracing::action& parent, net::node_link& link, const node_program& program,
                                             const std::string& cache_dir, std::string lease_id,
                                             std::int64_t expires_at, diagnostics& diag) {
  auto act = parent.child(action_types::node::lease,
                          {{"node", link.node()}, {"lease", lease_id}, {"expires_at", expires_at}});
  error_code ec;
  if (!node::lease_id_valid(lease_id) || expires_at < 0) {
    diag.set(fmt::format("lease {} on {}: not a lease id, or a negative expiry ({})", lease_id, link.node(), expires_at));
    ec = make_error_code(errc::node_lease_failed);
    act.fail(ec, diag);
    co_return ec;
  }
  const auto command = node_program_command(
      program, cache_dir, fmt::format("lease-set {} {}", lease_file_word(cache_dir, lease_id), expires_at));
  net::collect_sink output(64 << 10);
  net::exec_request request{command, nullptr, &output};
  auto done = co_await link.exec(act, request, diag);
  if (!done) {
    ec = done.error();
  } else if (done->status == 127 && output.err.find(missing_marker) != std::string::npos) {
    diag.set(fmt::format("the node program is not on {}: install it before setting a lease there", link.node()));
    ec = make_error_code(errc::node_lacks_tools);
  } else if (!done->success() && done->status != kept_later) {
    const auto why = trimmed(output.err);
    diag.set(fmt::format("setting lease {} on {} failed ({}){}{}", lease_id, link.node(), done->describe(),
                         why.empty() ? "" : ": ", why));
    ec = make_error_code(errc::node_lease_failed);
  }
  if (ec) {
    act.fail(ec, diag);
    co_return ec;
  }
  act.succeed({{"kept", done->status == kept_later}});
  co_return result<void>{};
}

void wrap_in_lease(task_line& line, const node_program& program, const std::string& cache_dir,
                   std::string_view lease_id, std::chrono::seconds grace) {
  const auto arguments = fmt::format("lease-run {} --grace {} -- /bin/sh -c {}", lease_file_word(cache_dir, lease_id),
                                     grace.count(), net::shell_quote(line.command));
  line.command = node_program_command(program, cache_dir, arguments);
}

}  // namespace ferry::agent
