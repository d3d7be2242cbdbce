#include "agent/run/ignored_hint.hpp"

#include <fmt/format.h>

#include <system_error>
#include <vector>

namespace ferry::agent {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t tail_bytes = 4096;
constexpr std::size_t lines_looked_at = 3;  // the exception's line, and a note or two printed after it

// The text between quotes that a Python repr of a plain string would print: 'x' or "x", nothing escaped.
std::optional<std::string> quoted(std::string_view text) {
  if (text.size() < 2 || (text.front() != '\'' && text.front() != '"') || text.back() != text.front())
    return std::nullopt;
  const auto inner = text.substr(1, text.size() - 2);
  if (inner.empty() || inner.find('\\') != std::string_view::npos || inner.find(text.front()) != std::string_view::npos)
    return std::nullopt;
  return std::string(inner);
}

// The path below the workspace that `name` stands for, or none when it lies outside.
std::optional<fs::path> in_workspace(const std::string& name, std::string_view node_workdir) {
  fs::path p(name);
  if (p.is_absolute()) {
    const fs::path workdir(node_workdir);
    if (node_workdir.empty()) return std::nullopt;
    p = p.lexically_relative(workdir);
    if (p.empty()) return std::nullopt;
  }
  p = p.lexically_normal();
  if (p.empty() || p == "." || *p.begin() == "..") return std::nullopt;
  return p;
}

// The workspace file or package that would have provided `module` ("a.b.c": a.py, a/, a/b.py, ...): the
// first that exists here on the way down.
std::optional<fs::path> module_source(const std::string& module, const fs::path& workspace) {
  fs::path at;
  std::size_t start = 0;
  for (;;) {
    const auto dot = module.find('.', start);
    const auto part = module.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty() || part.find('/') != std::string::npos) return std::nullopt;
    std::error_code ec;
    if (fs::is_regular_file(workspace / at / (part + ".py"), ec)) return at / (part + ".py");
    if (!fs::is_directory(workspace / at / part, ec)) return std::nullopt;
    at /= part;
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

}  // namespace

std::optional<missing_name> missing_in(std::string_view stderr_tail) {
  static constexpr std::string_view file_prefix = "FileNotFoundError: [Errno 2] No such file or directory: ";
  static constexpr std::string_view module_prefix = "ModuleNotFoundError: No module named ";
  for (const auto line : last_lines(stderr_tail, lines_looked_at)) {
    if (line.starts_with(file_prefix)) {
      if (auto name = quoted(line.substr(file_prefix.size()))) return missing_name{missing_name::kind::file, *name};
      return std::nullopt;
    }
    if (line.starts_with(module_prefix)) {
      if (auto name = quoted(line.substr(module_prefix.size())))
        return missing_name{missing_name::kind::module, *name};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<std::string> ignored_hint(std::string_view stderr_tail, const fs::path& workspace,
                                        std::string_view node_workdir, const packaging::walk_options& options) {
  const auto missing = missing_in(stderr_tail);
  if (!missing || workspace.empty()) return std::nullopt;
  std::optional<fs::path> relative;
  if (missing->what == missing_name::kind::file) {
    relative = in_workspace(missing->name, node_workdir);
    std::error_code ec;
    if (relative && !fs::exists(fs::symlink_status(workspace / *relative, ec))) relative.reset();
  } else {
    relative = module_source(missing->name, workspace);
  }
  if (!relative) return std::nullopt;
  const auto path = relative->generic_string();
  diagnostics diag;
  const auto why = packaging::explain_path(workspace, path, options, diag);
  if (!why || !why->starts_with("excluded by ")) return std::nullopt;
  return fmt::format("{} was not shipped: {} (ferry pack --explain {})", path, *why, path);
}

boost::asio::awaitable<std::optional<std::string>> ignored_hint(const command_context& ctx, std::string stderr_tail,
                                                                std::string node_workdir) {
  if (!missing_in(stderr_tail)) co_return std::nullopt;
  const auto settings = pack_settings_for(ctx, pack_request{});
  packaging::walk_options w;
  w.ignore = settings.scan.ignore;
  w.follow_external = settings.scan.follow_external;
  const auto workspace = discover_options_for(ctx).working_dir;  // the directory the pack's probe runs in
  co_return co_await net::offload(ctx.cpu, [&] { return ignored_hint(stderr_tail, workspace, node_workdir, w); });
}

std::vector<std::string_view> last_lines(std::string_view text, std::size_t count) {
  std::vector<std::string_view> out;
  while (!text.empty() && out.size() < count) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    const auto nl = text.rfind('\n');
    const auto line = nl == std::string_view::npos ? text : text.substr(nl + 1);
    if (!line.empty()) out.push_back(line);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(0, nl);
  }
  return out;
}

boost::asio::awaitable<error_code> stderr_tail::write(net::output_stream stream, std::span<const char> bytes) {
  if (stream == net::output_stream::err) {
    tail_.append(bytes.data(), bytes.size());
    if (tail_.size() > 2 * tail_bytes) tail_.erase(0, tail_.size() - tail_bytes);
  }
  co_return co_await next_.write(stream, bytes);
}

}  // namespace ferry::agent
