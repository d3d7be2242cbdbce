#pragma once
// `ferry doctor --nodes`: the node program this build sends to nodes, then every node of ferry's registry
// (the nodes `ferry nodes ls` lists), each a check of its own, run side by side: it answers SSH with
// ferry's key within ssh.connect_timeout, and it has what the node program needs there. The program is a
// static binary, so no libraries or glibc version count; what does is the machine (`uname -m` must be the
// architecture ferry-node was built for), the few tools that start it and put it in place (sh, cat, mkdir,
// chmod: no curl, unzip or python3), and a writable cache dir (the program and the layers) and state dir
// (the idle watchdog's), both under the login's XDG defaults as the node program uses them.
#include "agent/cli/command_context.hpp"
#include "agent/doctor/check.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::doctor {

boost::asio::awaitable<std::vector<check_result>> check_nodes(tracing::action& parent, const command_context& ctx);

// `uname -m`'s name for the machine an ELF file is for ("x86_64", "aarch64"), or "" for one this does not know.
std::string elf_machine(std::string_view elf);
// The same machine under one name: arm64 is aarch64, i686 is i386.
std::string canonical_machine(std::string_view uname_m);

}  // namespace ferry::agent::doctor
