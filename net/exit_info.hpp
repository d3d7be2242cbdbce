#pragma once
// How a remote command ended: its exit status, or the signal that killed it.
#include <optional>
#include <string>

namespace ferry::net {

struct exit_info {
  std::optional<int> status;  // the exit status, when the command exited
  std::string signal;         // the signal that ended it, without "SIG" ("TERM"), when one did
  bool core_dumped = false;

  bool success() const { return status && *status == 0; }
  // "exit status 1", "killed by signal TERM".
  std::string describe() const;
};

}  // namespace ferry::net
