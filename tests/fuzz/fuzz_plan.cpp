// The node program's plan parsers on hostile lines: the environment plan (header, layer, end, catalogue, site,
// peer and work_done lines) and the staging request. The plan arrives on stdin from ferry, but a parser that
// trusts its input is one protocol bug away from writing outside the cache. What parses must survive a round
// trip unchanged.
#include "agent/node/plan.hpp"
#include "agent/node/stage_plan.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

namespace node = ferry::agent::node;

namespace {

bool same(const node::layer_source& a, const node::layer_source& b) {
  if (a.id != b.id || a.name != b.name || a.shards.size() != b.shards.size()) return false;
  for (std::size_t i = 0; i < a.shards.size(); ++i) {
    const auto &x = a.shards[i], &y = b.shards[i];
    if (x.url != y.url || x.sha256 != y.sha256 || x.bytes != y.bytes || x.files != y.files || x.content != y.content ||
        x.id != y.id || x.key != y.key)
      return false;
  }
  return true;
}

// A parsed line, written again and parsed again, must give what the first parse gave.
void round_trip(const node::plan_line& line) {
  ferry::diagnostics diag;
  if (const auto* layer = std::get_if<node::placed_layer>(&line)) {
    auto again = node::parse_plan_line(node::layer_line(layer->index, layer->layer), diag);
    if (!again) std::abort();
    const auto* back = std::get_if<node::placed_layer>(&*again);
    if (!back || back->index != layer->index || !same(back->layer, layer->layer)) std::abort();
    (void)node::check_layer(layer->layer, diag);
  } else if (const auto* end = std::get_if<node::plan_end>(&line)) {
    auto again = node::parse_plan_line(node::end_line(*end), diag);
    const auto* back = again ? std::get_if<node::plan_end>(&*again) : nullptr;
    if (!back || back->layers != end->layers || back->workspace != end->workspace) std::abort();
  } else if (const auto* catalogue = std::get_if<node::plan_catalogue>(&line)) {
    auto again = node::parse_plan_line(node::catalogue_line(*catalogue), diag);
    const auto* back = again ? std::get_if<node::plan_catalogue>(&*again) : nullptr;
    if (!back || back->workspace != catalogue->workspace || back->layers.size() != catalogue->layers.size())
      std::abort();
    for (std::size_t i = 0; i < back->layers.size(); ++i) {
      const auto &a = back->layers[i], &b = catalogue->layers[i];
      if (a.index != b.index || a.id != b.id || a.name != b.name || a.rank != b.rank || a.modules != b.modules ||
          a.dists != b.dists)
        std::abort();
    }
  } else if (const auto* site = std::get_if<node::plan_site>(&line)) {
    auto again = node::parse_plan_line(node::site_line(*site), diag);
    const auto* back = again ? std::get_if<node::plan_site>(&*again) : nullptr;
    if (!back || back->hide_node_site != site->hide_node_site || back->path.size() != site->path.size() ||
        back->imports.size() != site->imports.size() || back->dirs.size() != site->dirs.size())
      std::abort();
    for (std::size_t i = 0; i < back->path.size(); ++i) {
      const auto &a = back->path[i], &b = site->path[i];
      if (a.what != b.what || a.ids != b.ids || a.raw != b.raw) std::abort();
    }
    for (std::size_t i = 0; i < back->imports.size(); ++i) {
      const auto &a = back->imports[i], &b = site->imports[i];
      if (a.id != b.id || a.file != b.file || a.line != b.line) std::abort();
    }
    for (std::size_t i = 0; i < back->dirs.size(); ++i)
      if (back->dirs[i].local != site->dirs[i].local || back->dirs[i].id != site->dirs[i].id) std::abort();
  } else if (const auto* peer = std::get_if<node::plan_peer>(&line)) {
    auto again = node::parse_plan_line(node::peer_line(*peer), diag);
    const auto* back = again ? std::get_if<node::plan_peer>(&*again) : nullptr;
    if (!back || back->url != peer->url) std::abort();
  } else if (std::holds_alternative<node::plan_work_done>(line)) {
    auto again = node::parse_plan_line(node::work_done_line(), diag);
    if (!again || !std::holds_alternative<node::plan_work_done>(*again)) std::abort();
  } else {
    const auto& header = std::get<node::plan_header>(line);
    auto again = node::parse_plan_line(node::header_line(header), diag);
    const auto* back = again ? std::get_if<node::plan_header>(&*again) : nullptr;
    if (!back || back->cache_dir != header.cache_dir || back->cache_cap != header.cache_cap ||
        back->task_id != header.task_id || back->lazy != header.lazy)
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::size_t index = 0;
  while (!input.empty()) {
    const auto nl = input.find('\n');
    const auto line = input.substr(0, nl);
    input = nl == std::string_view::npos ? std::string_view{} : input.substr(nl + 1);

    ferry::diagnostics diag;
    if (auto parsed = node::parse_plan_line(line, diag)) round_trip(*parsed);
    if (auto header = node::parse_stage_header(line, diag)) (void)node::stage_lines(header->first);
    if (auto object = node::parse_stage_object(line, index++, diag)) {
      // A path the parser accepted must be relative, with no empty, "." or ".." component.
      const std::string& path = object->path;
      if (path.empty() || path.front() == '/') std::abort();
      std::size_t start = 0;
      while (start <= path.size()) {
        const auto slash = path.find('/', start);
        const auto part = std::string_view(path).substr(start, slash - start);
        if (part.empty() || part == "." || part == "..") std::abort();
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
    }
  }
  return 0;
}
