#pragma once
// The wrapper's "ferry-exec-pgid=N" line (see wrap_in_process_group in net/ssh_exec.hpp), taken out of a
// command's stdout as it arrives, sans-io. The login shell may print before the wrapper runs (a chatty
// .bashrc): that preamble is not the command's output and is dropped with the line. Bytes are held back
// until the line is whole; the line counts only at the start of a line and only when it ends within
// the first max_preamble bytes, so where the chunks split the stream never changes the outcome. Without
// the line by then, or by the end of the output, the wrapper did not run: every byte held back is the
// command's own output.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ferry::net {

class exec_group_line {
 public:
  static constexpr std::string_view marker = "ferry-exec-pgid=";
  static constexpr std::size_t max_preamble = 64 << 10;

  // Takes the next stdout bytes; returns those that are the command's output (maybe none). The view is
  // valid until the next call.
  std::span<const char> take(std::span<const char> bytes);
  // The output ended: returns what was held back (the command's own, as no line came).
  std::span<const char> end();

  bool settled() const { return settled_; }  // found, or given up on
  std::optional<long> group() const { return group_; }

 private:
  bool line_is_group(std::size_t begin, std::size_t end);
  std::span<const char> settle(std::size_t from);

  std::string held_;
  std::size_t line_start_ = 0;  // of the line not yet whole in held_
  std::optional<long> group_;
  bool settled_ = false;
};

}  // namespace ferry::net
