#pragma once
// One line of `ferry doctor`: a named check that passed, failed (with the fix, one actionable sentence) or
// was skipped because a check it needs did not pass. Each check is a `ferry:doctor:check` action of its
// own: open_check() starts it, close_check() ends it with the result, so the trace says what the screen said.
#include "tracing/action.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::agent::doctor {

enum class check_status { passed, failed, skipped };

struct check_result {
  std::string name;  // stable, for --json and scripts: "credentials", "storage.list", "node:local-3f2a"
  check_status status = check_status::skipped;
  std::string detail;  // what was found: never a secret
  std::string fix;     // failed: what to do about it
  error_code cause;    // failed: the underlying error, when there is one (for the trace)

  bool passed() const { return status == check_status::passed; }
};

check_result passed(std::string name, std::string detail);
check_result failed(std::string name, std::string detail, std::string fix, error_code cause = {});
check_result skipped(std::string name, std::string why);

// Ctrl-C stopped the check before it knew: it failed, and says so rather than blame storage or the network.
bool is_interruption(const error_code& ec);
check_result interrupted(std::string name, std::string detail, error_code cause);

// Why the doctor must not read `file` (checked before it reads one itself): what it is when it is not a
// regular file (a directory, a FIFO that would block, a device that never ends), or that it is larger than
// `cap`; nullopt when it may be read, or when it does not exist (the caller says what that means).
std::optional<std::string> unreadable_kind(const std::filesystem::path& file, std::uintmax_t cap);

std::string_view to_string(check_status s);  // "passed", "failed", "skipped"

// The check's action under `parent`, {check: name}.
tracing::action open_check(tracing::action& parent, std::string_view name);
// Ends `act` as the result says (failed and skipped checks end failed, the fix as a field) and returns it.
check_result close_check(tracing::action& act, check_result r);
// A check that cannot run: its action, started and ended at once.
check_result skip_check(tracing::action& parent, std::string name, std::string why);

}  // namespace ferry::agent::doctor
