#include "provision/local/self_stop.hpp"

#include "provision/command.hpp"
#include "provision/local/sshd_files.hpp"

#include <fmt/format.h>

namespace ferry::provision::local {

std::filesystem::path self_stopped_marker(const std::filesystem::path& node_dir) { return node_dir / "self_stopped"; }

std::string self_stop_command(const machine& m) {
  if (m.pid <= 0 || m.dir.empty()) return {};
  sshd_layout l;
  l.dir = m.dir;
  // Fields after the ") " that ends the comm in /proc/PID/stat: $1 is the state, $2 the parent, $20 the
  // start time.
  return fmt::format(
      "printf '%s\\n' \"${{FERRY_STOP_REASON:-stopped itself}}\" > {marker}\n"
      "sshd={pid}\n"
      "if read -r s < /proc/$sshd/stat 2>/dev/null && s=${{s##*) }} && set -- $s && [ \"${{20}}\" = {start} ]; then\n"
      "  for p in /proc/[0-9]*; do\n"
      "    read -r s < \"$p/stat\" 2>/dev/null || continue\n"
      "    s=${{s##*) }}; set -- $s\n"
      "    [ \"$2\" = \"$sshd\" ] && kill -s TERM \"${{p#/proc/}}\" 2>/dev/null\n"
      "  done\n"
      "  kill -s TERM \"$sshd\"\n"
      "fi\n"
      "ns=$(cat {mnt_ns} 2>/dev/null)\n"
      "if [ -n \"$ns\" ] && [ \"$(readlink /proc/self/ns/mnt)\" = \"$ns\" ]; then\n"
      "  for p in /proc/[0-9]*; do\n"
      "    q=${{p#/proc/}}\n"
      "    [ \"$q\" = $$ ] || [ \"$q\" = \"$PPID\" ] && continue\n"
      "    [ \"$(readlink \"$p/ns/mnt\" 2>/dev/null)\" = \"$ns\" ] && kill -s TERM \"$q\" 2>/dev/null\n"
      "  done\n"
      "fi\n"
      "exit 0\n",
      fmt::arg("marker", shell_quote(self_stopped_marker(m.dir).string())), fmt::arg("pid", m.pid),
      fmt::arg("start", m.start_time), fmt::arg("mnt_ns", shell_quote(l.mount_ns().string())));
}

}  // namespace ferry::provision::local
