// The script materialise() sends: the plan as sh assignments and one function listing the layers, then the
// fixed part (agent/materialise_script.inc). Everything from the plan goes in single-quoted
// (net/ssh_quote.hpp), so no URL, id or path is ever read by the node's shell as code.
#include "agent/error.hpp"
#include "agent/materialise.hpp"
#include "net/ssh_quote.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

namespace ferry::agent {
namespace {

constexpr std::string_view script_body =
#include "agent/materialise_script.inc"
    ;

bool is_hex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

bool one_line(std::string_view text) { return text.find_first_of(std::string_view("\0\n\r", 3)) == std::string_view::npos; }

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Seconds as curl and flock take them: "10", "0.25".
std::string seconds(config::duration d) {
  const auto ms = std::max<long long>(0, d.count());
  if (ms % 1000 == 0) return fmt::format("{}", ms / 1000);
  auto text = fmt::format("{}.{:03}", ms / 1000, ms % 1000);
  while (text.back() == '0') text.pop_back();
  return text;
}

// A layer's name in a comment: printable ASCII only, so that it cannot end the comment.
std::string comment_text(std::string_view text) {
  std::string out;
  for (unsigned char c : text) out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  return out;
}

void append_layer(std::string& out, const layer_source& layer) {
  fmt::format_to(std::back_inserter(out), "  # {}\n  \"$1\" {}", comment_text(layer.name), net::shell_quote(layer.id));
  for (const auto& s : layer.shards) {
    fmt::format_to(std::back_inserter(out), " \\\n    {} {} {}", net::shell_quote(s.url),
                   net::shell_quote(lower(s.sha256)), s.bytes);
  }
  out += "\n";
}

}  // namespace

result<void> check_plan(const environment_plan& plan, diagnostics& diag) {
  auto invalid = [&](std::string text) {
    diag.set(std::move(text));
    return result<void>(boost::system::in_place_error, make_error_code(errc::invalid_plan));
  };
  for (const auto& layer : plan.layers) {
    if (!is_hex(layer.id))
      return invalid(fmt::format("layer {} has the id '{}', which is not hex", layer.name, layer.id));
    for (std::size_t i = 0; i < layer.shards.size(); ++i) {
      const auto& s = layer.shards[i];
      if (s.sha256.size() != 64 || !is_hex(s.sha256))
        return invalid(fmt::format("shard {} of layer {} has the digest '{}', which is not a hex SHA-256", i + 1,
                                   layer.name, s.sha256));
      if (s.url.empty() || !one_line(s.url))
        return invalid(fmt::format("shard {} of layer {} has an empty URL or one with a line break", i + 1,
                                   layer.name));
    }
  }
  if (plan.workspace && *plan.workspace >= plan.layers.size())
    return invalid(fmt::format("the workspace is layer {} of a plan of {}", *plan.workspace + 1, plan.layers.size()));
  if (!one_line(plan.cache_dir))
    return invalid(fmt::format("the node's cache directory '{}' holds a line break", plan.cache_dir));
  return {};
}

std::string materialise_script(const environment_plan& plan, const materialise_options& options) {
  std::string out =
      "# ferry: make a run's layers present in this node's layer cache (agent/materialise.hpp).\n"
      "# ---- This run's settings and plan. ----\n";
  auto line = [&](std::string_view name, std::string_view value) {
    fmt::format_to(std::back_inserter(out), "{}={}\n", name, value);
  };
  line("cache_dir", net::shell_quote(plan.cache_dir));
  line("cache_cap", std::to_string(plan.cache_cap));
  line("connect_timeout", seconds(options.connect_timeout));
  line("download_timeout", seconds(options.download_timeout));
  line("download_retries", std::to_string(std::max(0, options.download_attempts - 1)));
  line("lock_timeout", seconds(options.lock_timeout));
  line("parallelism", std::to_string(std::max(1, options.parallelism)));
  line("workspace_id", net::shell_quote(plan.workspace ? plan.layers[*plan.workspace].id : std::string()));

  // Each id once: equal ids are equal contents (two empty sys.path directories, say).
  std::set<std::string_view> seen;
  std::string ids;
  std::string calls;
  for (const auto& layer : plan.layers) {
    if (!seen.insert(layer.id).second) continue;
    if (!ids.empty()) ids += ' ';
    ids += layer.id;
    append_layer(calls, layer);
  }
  line("plan_ids", net::shell_quote(ids));
  out += "# for_each_layer F: runs F ID [URL SHA256 BYTES]... for each layer, in sys.path order.\n";
  out += "for_each_layer() {\n";
  out += calls.empty() ? std::string("  :\n") : calls;
  out += "}\n";
  out += script_body;
  return out;
}

}  // namespace ferry::agent
