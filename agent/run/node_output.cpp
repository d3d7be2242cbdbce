#include "agent/run/node_output.hpp"

#include <utility>

#include <cerrno>
#include <unistd.h>

namespace ferry::agent {

error_code write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const auto n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {errno, boost::system::system_category()};
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

void node_output::emit(net::output_stream stream, std::string_view text) {
  (void)write_all(stream == net::output_stream::out ? STDOUT_FILENO : STDERR_FILENO, text);
}

boost::asio::awaitable<error_code> node_output::write(net::output_stream stream, std::span<const char> bytes) {
  const std::string_view text(bytes.data(), bytes.size());
  if (on_first_ && !text.empty()) std::exchange(on_first_, nullptr)();
  if (prefix_.empty()) {
    // A closed stdout (`ferry exec ... | head`) ends the command, as it would locally.
    co_return write_all(stream == net::output_stream::out ? STDOUT_FILENO : STDERR_FILENO, text);
  }
  auto& pending = stream == net::output_stream::out ? pending_out_ : pending_err_;
  pending.append(text);
  std::string lines;
  std::size_t start = 0;
  for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
    lines.append(prefix_).append(pending, start, nl + 1 - start);
    start = nl + 1;
  }
  pending.erase(0, start);
  if (!lines.empty()) emit(stream, lines);
  co_return error_code{};
}

void node_output::flush() {
  if (!pending_out_.empty()) emit(net::output_stream::out, prefix_ + pending_out_ + "\n");
  if (!pending_err_.empty()) emit(net::output_stream::err, prefix_ + pending_err_ + "\n");
  pending_out_.clear();
  pending_err_.clear();
}

}  // namespace ferry::agent
