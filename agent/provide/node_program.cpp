#include "agent/provide/node_program.hpp"

#include "agent/error.hpp"
#include "net/digest.hpp"
#include "net/node_link.hpp"
#include "net/shell_quote.hpp"
#include "net/exec_streams.hpp"
#include "tracing/action_types.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <mutex>
#include <unistd.h>

namespace ferry::agent {
namespace {

std::string path_assignment(const std::string& node_path) {
  return node_path.empty() ? std::string() : fmt::format("PATH={}; export PATH; ", net::shell_quote(node_path));
}

std::filesystem::path beside_executable() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "ferry-node";
  return self.parent_path() / "ferry-node";
}

}  // namespace

std::string node_cache_word(const std::string& cache_dir) {
  return cache_dir.empty() ? std::string("\"${XDG_CACHE_HOME:-$HOME/.cache}/ferry\"") : net::shell_quote(cache_dir);
}

result<std::shared_ptr<const node_program>> load_node_program(const std::filesystem::path& path, diagnostics& diag) {
  auto program = std::make_shared<node_program>();
  program->local = path.empty() ? beside_executable() : path;
  std::ifstream in(program->local, std::ios::binary);
  if (!in) {
    diag.set(fmt::format("the node program {} is missing: ferry was built without it (build the ferry-node target)",
                         program->local.string()));
    return make_error_code(errc::node_lacks_tools);
  }
  // In one read: every command that reaches a node loads it, and byte by byte it took tens of milliseconds.
  std::error_code size_ec;
  const auto size = std::filesystem::file_size(program->local, size_ec);
  if (!size_ec) {
    program->bytes.resize(size);
    in.read(program->bytes.data(), static_cast<std::streamsize>(size));
    program->bytes.resize(static_cast<std::size_t>(in.gcount()));
  }
  if (size_ec || !in) {
    diag.set(fmt::format("the node program {} cannot be read", program->local.string()));
    return make_error_code(errc::node_lacks_tools);
  }
  program->sha256 = net::hex_sha256(program->bytes);
  return std::shared_ptr<const node_program>(std::move(program));
}

result<std::shared_ptr<const node_program>> shared_node_program(const std::filesystem::path& path, diagnostics& diag) {
  static std::mutex mutex;
  static std::map<std::filesystem::path, std::shared_ptr<const node_program>> loaded;
  const std::lock_guard lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  auto program = load_node_program(path, diag);
  if (program) loaded.emplace(path, *program);
  return program;
}

std::string node_program_command(const node_program& program, const std::string& cache_dir,
                                 const std::string& arguments, const std::string& node_path) {
  return fmt::format("{}p={}/bin/ferry-node-{}; if [ -x \"$p\" ]; then exec \"$p\" {}; fi; echo '{}' >&2; exit 127",
                     path_assignment(node_path), node_cache_word(cache_dir), program.sha256, arguments, missing_marker);
}

std::string as_tenant_words(const node_program& program, const std::string& cache_dir, const std::string& user) {
  return fmt::format("{}/bin/ferry-node-{} as-tenant {} --", node_cache_word(cache_dir), program.sha256,
                     net::shell_quote(user));
}

asio::awaitable<result<void>> install_node_program(tracing::action& parent, net::node_link& link,
                                                   const node_program& program, const std::string& cache_dir,
                                                   const std::string& node_path, diagnostics& diag) {
  auto act = parent.child(action_types::node::install,
                          {{"node", link.node()}, {"sha256", program.sha256}, {"bytes", program.bytes.size()}});
  // Concurrent installs on one node each write their own temporary file; the renames are atomic and
  // put the same bytes in place. The EXIT trap removes a copy that never got renamed.
  const auto command = fmt::format(
      "{}d={}/bin; t=\"$d/.ferry-node.$$\"; trap 'rm -f \"$t\"' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; "
      "trap 'exit 143' TERM; mkdir -p \"$d\" && cat > \"$t\" && chmod 700 \"$t\" && "
      "\"$t\" install {} \"$d/ferry-node-{}\"",
      path_assignment(node_path), node_cache_word(cache_dir), program.sha256, program.sha256);
  net::buffer_source input(program.bytes);
  net::collect_sink output(64 << 10);
  net::exec_request request{command, &input, &output};
  auto done = co_await link.exec(act, request, diag);
  error_code ec;
  if (!done) {
    ec = done.error();
  } else if (!done->success()) {
    auto why = output.err;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    diag.set(fmt::format("installing the node program on {} failed ({}){}{}", link.node(), done->describe(),
                         why.empty() ? "" : ": ", why));
    ec = make_error_code(errc::node_lacks_tools);
  }
  if (ec) {
    act.fail(ec, diag);
    co_return ec;
  }
  act.succeed();
  co_return result<void>{};
}

}  // namespace ferry::agent
