#include "agent/run/python_check.hpp"

#include "agent/error.hpp"
#include "net/node_link.hpp"
#include "net/shell_quote.hpp"

#include <fmt/format.h>

#include <sstream>

namespace ferry::agent {
namespace {

// -S: the facts of the interpreter alone, fast, whatever its site does. Every Python 3 (no f-strings).
constexpr std::string_view script = R"PY(import os, sys, sysconfig
v = sys.version_info
impl = sys.implementation.name
g = ''
try:
    g = os.confstr('CS_GNU_LIBC_VERSION') or ''
except (ValueError, OSError, AttributeError):
    pass
tag = {'cpython': 'cp', 'pypy': 'pp'}.get(impl, impl)
platform = sysconfig.get_platform().replace('-', '_').replace('.', '_')
glibc = g.split()[1] if g.startswith('glibc ') else '-'
print('FERRY-PYTHON %s %d.%d.%d %s %s%d%d-%s %s' % (impl, v[0], v[1], v[2], os.uname()[4], tag, v[0], v[1], platform, glibc))
)PY";

constexpr std::string_view marker = "FERRY-PYTHON ";

std::string minor_of(std::string_view version) {
  const auto first = version.find('.');
  const auto second = first == std::string_view::npos ? first : version.find('.', first + 1);
  return std::string(version.substr(0, second));
}

// "cp311-linux_x86_64" -> "linux_x86_64"
std::string_view platform_of(std::string_view tag) {
  const auto dash = tag.find('-');
  return dash == std::string_view::npos ? tag : tag.substr(dash + 1);
}

std::string names(const std::vector<std::string>& list) {
  constexpr std::size_t shown = 8;
  std::string out;
  for (std::size_t i = 0; i < list.size() && i < shown; ++i) out += (i ? ", " : "") + list[i];
  if (list.size() > shown) out += fmt::format(" and {} more", list.size() - shown);
  return out;
}

std::string side(std::string_view impl, std::string_view version, std::string_view platform) {
  return fmt::format("{} {} ({})", impl, version, platform_of(platform));
}

python_verdict refuse(std::string text) { return {python_verdict::kind::refuse, std::move(text)}; }

}  // namespace

std::string_view node_python_script() { return script; }

bool parse_node_python(std::string_view out, node_python& got, std::string& why) {
  const auto at = out.rfind(marker);
  if (at == std::string_view::npos) {
    why = "it printed no answer";
    return false;
  }
  auto line = out.substr(at + marker.size());
  line = line.substr(0, line.find('\n'));
  std::istringstream words{std::string(line)};
  std::string glibc;
  if (!(words >> got.implementation >> got.version >> got.machine >> got.platform >> glibc)) {
    why = fmt::format("its answer '{}' is not five words", line);
    return false;
  }
  got.glibc = glibc == "-" ? std::string() : glibc;
  return true;
}

python_verdict compare_python(const packaging::python_info& local, const node_python& node, std::string_view where,
                              const std::vector<std::string>& compiled) {
  const auto here = side(local.implementation.empty() ? "python" : local.implementation, local.version, local.platform);
  const auto there = side(node.implementation, node.version, node.platform);
  const auto both = fmt::format("{} is {}; the environment was packed with {} ({})", where, there, here,
                                local.executable);
  constexpr std::string_view fix =
      "Run the nodes with the same Python (an image or a venv with it), or pack with the interpreter the nodes "
      "have (packaging.python)";
  if (!local.implementation.empty() && local.implementation != node.implementation)
    return refuse(fmt::format("{}. Another implementation cannot load its modules. {}.", both, fix));
  if (platform_of(local.platform) != platform_of(node.platform) ||
      (!local.machine.empty() && local.machine != node.machine))
    return refuse(fmt::format("{}. Another platform or machine cannot load its compiled modules{}. {}.", both,
                              compiled.empty() ? "" : fmt::format(" ({})", names(compiled)), fix));
  if (minor_of(local.version) != minor_of(node.version))
    return refuse(fmt::format("{}. Python {} cannot load what was built for {}{}. {}.", both, minor_of(node.version),
                              minor_of(local.version),
                              compiled.empty() ? "" : fmt::format(": {} hold compiled modules", names(compiled)),
                              fix));
  if (!local.glibc.empty()) {
    const auto need = packaging::glibc_version(local.glibc);
    const auto have = packaging::glibc_version(node.glibc);
    if (node.glibc.empty() || have < need)
      return refuse(fmt::format("{} has glibc {}; {} need glibc {} or newer (their wheels' manylinux tags). Run "
                                "the nodes on a newer distribution, or install wheels built for an older glibc.",
                                where, node.glibc.empty() ? std::string("none") : node.glibc, names(local.glibc_by),
                                local.glibc));
  }
  if (local.version != node.version)
    return {python_verdict::kind::warn, fmt::format("{} is Python {}; the environment was packed with {}",
                                                    where, node.version, local.version)};
  return {};
}

boost::asio::awaitable<result<node_python>> ask_node_python(tracing::action& parent, net::node_link& link,
                                                            const std::string& python, const std::string& workdir,
                                                            diagnostics& diag) {
  auto command = fmt::format("{} -S -c {}", net::shell_quote(python), net::shell_quote(script));
  if (!workdir.empty()) command = fmt::format("cd {} && {}", net::shell_quote(workdir), command);
  auto ran = co_await net::run_command(parent, link, command, diag);
  if (!ran) co_return ran.error();
  node_python got;
  std::string why;
  if (!ran->exit.success()) {
    why = ran->exit.describe();
    if (!ran->err.empty()) why += ": " + ran->err.substr(0, 400);
  } else if (parse_node_python(ran->out, got, why)) {
    co_return got;
  }
  diag.set(fmt::format("{} on the node could not be asked what it is ({})", python, why));
  co_return make_error_code(errc::python_unknown);
}

}  // namespace ferry::agent
