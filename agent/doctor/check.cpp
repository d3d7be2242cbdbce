#include "agent/doctor/check.hpp"

#include "tracing/action_types.hpp"

#include <boost/asio/error.hpp>
#include <fmt/format.h>

#include <sys/stat.h>

namespace ferry::agent::doctor {
namespace {

// Codes for the trace of a check that failed without an underlying error (a clock too far off, a key file
// others can read) and of one skipped: a check's end message always names a category and a reason.
enum class outcome { failed = 1, skipped };

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.doctor"; }
  std::string message(int value) const override {
    return static_cast<outcome>(value) == outcome::skipped ? "check skipped" : "check failed";
  }
};

error_code code_of(outcome o) {
  static const category_impl instance;
  return {static_cast<int>(o), instance};
}

}  // namespace

check_result passed(std::string name, std::string detail) {
  return {std::move(name), check_status::passed, std::move(detail), {}, {}};
}

check_result failed(std::string name, std::string detail, std::string fix, error_code cause) {
  return {std::move(name), check_status::failed, std::move(detail), std::move(fix), cause};
}

check_result skipped(std::string name, std::string why) {
  return {std::move(name), check_status::skipped, std::move(why), {}, {}};
}

bool is_interruption(const error_code& ec) { return ec == boost::asio::error::operation_aborted; }

check_result interrupted(std::string name, std::string detail, error_code cause) {
  return failed(std::move(name), std::move(detail), "run `ferry doctor` again to finish the check", cause);
}

std::optional<std::string> unreadable_kind(const std::filesystem::path& file, std::uintmax_t cap) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return std::nullopt;
  const auto kind = S_ISDIR(st.st_mode)    ? "a directory"
                    : S_ISFIFO(st.st_mode) ? "a FIFO"
                    : S_ISCHR(st.st_mode)  ? "a character device"
                    : S_ISBLK(st.st_mode)  ? "a block device"
                    : S_ISSOCK(st.st_mode) ? "a socket"
                                           : nullptr;
  if (!S_ISREG(st.st_mode)) return fmt::format("{} is not a regular file ({})", file.string(), kind ? kind : "?");
  if (static_cast<std::uintmax_t>(st.st_size) > cap)
    return fmt::format("{} is {} bytes, more than the {} such a file can be", file.string(), st.st_size, cap);
  return std::nullopt;
}

std::string_view to_string(check_status s) {
  switch (s) {
    case check_status::passed: return "passed";
    case check_status::failed: return "failed";
    case check_status::skipped: return "skipped";
  }
  return "skipped";
}

tracing::action open_check(tracing::action& parent, std::string_view name) {
  return parent.child(action_types::doctor::check, {{"check", name}});
}

check_result close_check(tracing::action& act, check_result r) {
  switch (r.status) {
    case check_status::passed:
      act.succeed({{"detail", r.detail}});
      break;
    case check_status::failed:
      act.fail(r.cause ? r.cause : code_of(outcome::failed), r.detail, {{"fix", r.fix}});
      break;
    case check_status::skipped:
      act.fail(code_of(outcome::skipped), r.detail, {{"skipped", true}});
      break;
  }
  return r;
}

check_result skip_check(tracing::action& parent, std::string name, std::string why) {
  auto act = open_check(parent, name);
  return close_check(act, skipped(std::move(name), std::move(why)));
}

}  // namespace ferry::agent::doctor
