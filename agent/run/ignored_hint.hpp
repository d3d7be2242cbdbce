#pragma once
// A failed command whose cause the ignore rules made: its stderr ends with Python's
// `FileNotFoundError: [Errno 2] No such file or directory: 'data/config.yaml'` or
// `ModuleNotFoundError: No module named 'x'`, and the file (or the workspace file that would have provided
// the module) exists here but was kept out of the workspace's layer. One line names the rule:
//   data/config.yaml was not shipped: excluded by .gitignore:1: data/ (ferry pack --explain data/config.yaml)
// Never a guess: only a path inside the workspace (relative to the command's directory on the node, which
// is the workspace's layer, or absolute below it), that exists here, and that `ferry pack --explain` says
// a rule excluded.
#include "agent/pack/pack_job.hpp"
#include "net/offload.hpp"
#include "net/exec_streams.hpp"
#include "packaging/tree_walker.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::agent {

// What the last lines of a Python program's stderr say it did not find.
struct missing_name {
  enum class kind { file, module };
  kind what = kind::file;
  std::string name;  // the path as the program gave it, or the dotted module name
};
std::optional<missing_name> missing_in(std::string_view stderr_tail);

// The hint for `stderr_tail`, or none. Reads the workspace's ignore files: run it through offload().
// `node_workdir` is the command's directory on the node (an absolute path the program may have used).
std::optional<std::string> ignored_hint(std::string_view stderr_tail, const std::filesystem::path& workspace,
                                        std::string_view node_workdir, const packaging::walk_options& options);

// The same for a command of `ctx` (the workspace and rules `ferry pack --explain` uses there), on the CPU
// pool. It needs no finished pack: a lazy start's command may fail before the pack is done.
boost::asio::awaitable<std::optional<std::string>> ignored_hint(const command_context& ctx, std::string stderr_tail,
                                                                std::string node_workdir);

// The last `count` lines of `text` that are not empty, the last first, without their line ends.
std::vector<std::string_view> last_lines(std::string_view text, std::size_t count);

// Passes output on to `next`, keeping the last few KiB of stderr (for ignored_hint, and the line a failed
// node is told by).
class stderr_tail final : public net::output_sink {
 public:
  explicit stderr_tail(net::output_sink& next) : next_(next) {}
  boost::asio::awaitable<error_code> write(net::output_stream stream, std::span<const char> bytes) override;
  const std::string& text() const { return tail_; }

 private:
  net::output_sink& next_;
  std::string tail_;
};

}  // namespace ferry::agent
