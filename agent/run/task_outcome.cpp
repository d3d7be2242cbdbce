#include "agent/run/task_outcome.hpp"

#include "agent/cli/exit_code.hpp"

#include <chrono>
#include <csignal>
#include <utility>

namespace ferry::agent {

int signal_number(std::string_view name) {
  static constexpr std::pair<std::string_view, int> known[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"TRAP", SIGTRAP},
      {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"USR1", SIGUSR1},
      {"SEGV", SIGSEGV}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}};
  for (const auto& [n, v] : known) {
    if (n == name) return v;
  }
  return 0;
}

int exit_code_of(const net::exit_info& e) {
  if (e.status) return *e.status;
  const int sig = signal_number(e.signal);
  return sig ? 128 + sig : exit_code::failure;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ferry::agent
