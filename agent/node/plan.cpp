#include "agent/node/plan.hpp"

#include "agent/node/error.hpp"
#include "agent/node/plan_reader.hpp"
#include "agent/node/tenant_user.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace ferry::agent::node {
namespace json = boost::json;
using namespace plan_reading;

result<void> check_layer(const layer_source& layer, diagnostics& diag) {
  if (!is_hex(layer.id) || layer.id.size() > 128)
    return bad(diag, fmt::format("layer {} has the id '{}', which is not hex", layer.name, layer.id));
  for (std::size_t i = 0; i < layer.shards.size(); ++i) {
    const auto& s = layer.shards[i];
    if (!s.stored()) {
      // On its way to storage: its shard line brings the URL and the digest.
      if (!s.sha256.empty() || s.bytes != 0)
        return bad(diag, fmt::format("shard {} of layer {} has no URL, yet a digest or a size", i + 1, layer.name));
    } else if (s.sha256.size() != 64 || !is_hex(s.sha256))
      return bad(diag, fmt::format("shard {} of layer {} has the digest '{}', which is not a hex SHA-256", i + 1,
                                   layer.name, s.sha256));
    if (s.id.size() != 64 || !is_hex(s.id))
      return bad(diag, fmt::format("shard {} of layer {} has the id '{}', which is not a hex SHA-256: a shard "
                                   "without the id its workstation packed cannot be checked",
                                   i + 1, layer.name, s.id));
    if (!one_line(s.key))
      return bad(diag, fmt::format("shard {} of layer {} has a key with a line break", i + 1, layer.name));
    if (!one_line(s.url))
      return bad(diag, fmt::format("shard {} of layer {} has a URL with a line break", i + 1, layer.name));
    // A piece is one entry of `content` bytes inside its file: the writer trusts these bounds.
    if (s.is_piece() && (s.files != 1 || s.content == 0 || s.piece_offset > s.file_size ||
                         s.content > s.file_size - s.piece_offset))
      return bad(diag, fmt::format("shard {} of layer {} is a piece of {} bytes at {} of a file of {} bytes with {} "
                                   "files: not a piece of that file",
                                   i + 1, layer.name, s.content, s.piece_offset, s.file_size, s.files));
  }
  return {};
}

namespace {

result<void> read_piece(const json::object& shard, std::string_view where, shard_source& s, diagnostics& diag) {
  const auto* po = object_of(shard.at("piece"));
  if (!po) return bad(diag, fmt::format("the plan's {}.piece is not an object", where));
  const auto piece_where = fmt::format("{}.piece", where);
  reader pr{*po, piece_where, diag, {}};
  s.piece_path = pr.text("path");
  s.piece_offset = pr.number("offset");
  s.file_size = pr.number("file_size");
  if (pr.ec) return pr.ec;
  if (s.file_size == 0) return bad(diag, fmt::format("the plan's {}.piece has a file_size of 0", where));
  if (s.piece_path.empty() || !one_line(s.piece_path))
    return bad(diag, fmt::format("the plan's {}.piece has an empty path or one with a line break", where));
  return {};
}

}  // namespace

result<void> check_plan(const environment_plan& plan, diagnostics& diag) {
  for (const auto& layer : plan.layers) {
    if (auto r = check_layer(layer, diag); !r) return r;
    // A whole plan has no shard lines to follow: every shard is in storage.
    for (std::size_t i = 0; i < layer.shards.size(); ++i)
      if (!layer.shards[i].stored())
        return bad(diag, fmt::format("shard {} of layer {} has no URL", i + 1, layer.name));
  }
  if (plan.workspace && *plan.workspace >= plan.layers.size())
    return bad(diag, fmt::format("the workspace is layer {} of a plan of {}", *plan.workspace + 1, plan.layers.size()));
  if (!one_line(plan.cache_dir))
    return bad(diag, fmt::format("the node's cache directory '{}' holds a line break", plan.cache_dir));
  return {};
}

json::object limits_json(const node_limits& m) {
  return json::object{{"connect_timeout_ms", m.connect_timeout_ms},
                      {"read_timeout_ms", m.read_timeout_ms},
                      {"lock_timeout_ms", m.lock_timeout_ms},
                      {"attempts", m.attempts},
                      {"retry_base_ms", m.retry_base_ms},
                      {"retry_max_ms", m.retry_max_ms},
                      {"parallelism", m.parallelism},
                      {"range_size", m.range_size},
                      {"max_shard_content", m.max_shard_content},
                      {"shutdown_grace_ms", m.shutdown_grace_ms}};
}

result<node_limits> read_limits(const json::value* limits, diagnostics& diag) {
  node_limits l;
  if (!limits || !object_of(*limits)) return l;
  reader m{*object_of(*limits), "limits", diag, {}};
  // Deadlines between a millisecond and a day: 0 would fail every wait, 2^64 would wrap negative.
  constexpr std::uint64_t day_ms = 86'400'000;
  auto deadline = [&](std::string_view key, std::int64_t fallback) {
    return static_cast<std::int64_t>(
        std::clamp<std::uint64_t>(m.number_or(key, static_cast<std::uint64_t>(fallback)), 1, day_ms));
  };
  l.connect_timeout_ms = deadline("connect_timeout_ms", l.connect_timeout_ms);
  l.read_timeout_ms = deadline("read_timeout_ms", l.read_timeout_ms);
  l.lock_timeout_ms = deadline("lock_timeout_ms", l.lock_timeout_ms);
  l.attempts = static_cast<int>(std::clamp<std::uint64_t>(m.number_or("attempts", l.attempts), 1, 100));
  l.retry_base_ms = deadline("retry_base_ms", l.retry_base_ms);
  l.retry_max_ms = deadline("retry_max_ms", l.retry_max_ms);
  l.parallelism = static_cast<int>(std::clamp<std::uint64_t>(m.number_or("parallelism", l.parallelism), 1, 256));
  l.range_size = std::max<std::uint64_t>(m.number_or("range_size", l.range_size), 64 << 10);
  l.max_shard_content = m.number_or("max_shard_content", l.max_shard_content);
  l.shutdown_grace_ms = deadline("shutdown_grace_ms", l.shutdown_grace_ms);
  if (m.ec) return m.ec;
  return l;
}

std::string header_line(const plan_header& h) {
  json::object o{{"cache_dir", h.cache_dir},
                 {"cache_cap", h.cache_cap},
                 {"task_id", h.task_id},
                 {"limits", limits_json(h.limits)}};
  if (h.lazy) o["lazy"] = true;
  if (!h.serve_id.empty()) o["serve_id"] = h.serve_id;
  if (!h.peer_token.empty()) o["peer_token"] = h.peer_token;
  if (!h.tenant.empty()) o["tenant"] = h.tenant;
  return json::serialize(json::object{{"header", std::move(o)}});
}

std::string layer_line(std::size_t index, const layer_source& l) {
  json::array shards;
  for (const auto& s : l.shards) {
    json::object o{{"files", s.files}, {"content", s.content}, {"id", s.id}, {"key", s.key}};
    if (s.stored()) {  // a shard not yet in storage says neither: its shard line will
      o["url"] = s.url;
      o["sha256"] = s.sha256;
      o["bytes"] = s.bytes;
    }
    if (s.is_piece())
      o["piece"] = json::object{{"path", s.piece_path}, {"offset", s.piece_offset}, {"file_size", s.file_size}};
    shards.push_back(std::move(o));
  }
  return json::serialize(
      json::object{{"layer", json::object{{"index", index}, {"id", l.id}, {"name", l.name}, {"shards", std::move(shards)}}}});
}

std::string shard_line(const plan_shard& s) {
  return json::serialize(json::object{{"shard", json::object{{"layer", s.layer},
                                                             {"index", s.index},
                                                             {"url", s.url},
                                                             {"sha256", s.sha256},
                                                             {"bytes", s.bytes}}}});
}

std::uint64_t content_bytes(const layer_source& layer) {
  std::uint64_t total = 0;
  for (const auto& s : layer.shards) total += s.content;
  return total;
}

std::string catalogue_line(const plan_catalogue& c) {
  json::array layers;
  for (const auto& e : c.layers) {
    json::array modules(e.modules.begin(), e.modules.end());
    json::array dists(e.dists.begin(), e.dists.end());
    layers.push_back(json::object{{"index", e.index}, {"id", e.id}, {"name", e.name}, {"rank", e.rank},
                                  {"modules", std::move(modules)}, {"dists", std::move(dists)}});
  }
  json::object o{{"layers", std::move(layers)}};
  if (c.workspace) o["workspace"] = *c.workspace;
  return json::serialize(json::object{{"catalogue", std::move(o)}});
}

std::string work_done_line() { return R"({"work_done":{}})"; }

std::string peer_line(const plan_peer& peer) {
  return json::serialize(json::object{{"peer", json::object{{"url", peer.url}}}});
}

std::string end_line(const plan_end& e) {
  json::object o{{"layers", e.layers}};
  if (e.workspace) o["workspace"] = *e.workspace;
  return json::serialize(json::object{{"end", std::move(o)}});
}

std::string plan_lines(const environment_plan& plan) {
  std::string out = header_line({plan.cache_dir, plan.cache_cap, plan.task_id, plan.limits}) + "\n";
  for (std::size_t i = 0; i < plan.layers.size(); ++i) out += layer_line(i, plan.layers[i]) + "\n";
  return out + end_line({plan.layers.size(), plan.workspace}) + "\n";
}

namespace {

// http://HOST:PORT and nothing more: no path, no user, no line break.
bool peer_url_ok(std::string_view url) {
  if (!url.starts_with("http://") || !one_line(url)) return false;
  const auto rest = url.substr(7);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) return false;
  if (rest.find_first_of("/@?# ") != std::string_view::npos) return false;
  return std::all_of(rest.begin() + static_cast<std::ptrdiff_t>(colon) + 1, rest.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

result<plan_header> read_header(const json::object& top, diagnostics& diag) {
  plan_header h;
  reader r{top, "header", diag, {}};
  h.cache_dir = r.text("cache_dir");
  h.cache_cap = r.number("cache_cap");
  h.task_id = r.text("task_id");
  if (const auto* lazy = top.if_contains("lazy")) {
    if (!lazy->is_bool()) return bad(diag, "the plan's header.lazy is not true or false");
    h.lazy = lazy->get_bool();
  }
  if (top.contains("serve_id")) h.serve_id = r.text("serve_id");
  if (top.contains("peer_token")) h.peer_token = r.text("peer_token");
  if (top.contains("tenant")) h.tenant = r.text("tenant");
  if (r.ec) return r.ec;
  if (!h.tenant.empty() && !tenant_user_ok(h.tenant))
    return bad(diag, fmt::format("the plan's header.tenant '{}' is not a tenant's user name", h.tenant.substr(0, 64)));
  if (!h.serve_id.empty() && (h.serve_id.size() > 64 || !is_hex(h.serve_id)))
    return bad(diag, "the plan's header.serve_id is not hex");
  if (!h.peer_token.empty() && (h.peer_token.size() != 64 || !is_hex(h.peer_token)))
    return bad(diag, "the plan's header.peer_token is not 64 hex digits");
  if (!one_line(h.cache_dir))
    return bad(diag, fmt::format("the node's cache directory '{}' holds a line break", h.cache_dir));
  auto limits = read_limits(top.if_contains("limits"), diag);
  if (!limits) return limits.error();
  h.limits = *limits;
  return h;
}

result<placed_layer> read_layer(const json::object& lo, diagnostics& diag) {
  placed_layer out;
  reader lr{lo, "layer", diag, {}};
  out.index = static_cast<std::size_t>(lr.number("index"));
  auto& layer = out.layer;
  layer.id = lr.text("id");
  layer.name = lr.text("name");
  const auto* shards = lr.array("shards");
  if (lr.ec) return lr.ec;
  for (std::size_t j = 0; j < shards->size(); ++j) {
    const auto* so = object_of((*shards)[j]);
    if (!so) return bad(diag, fmt::format("the plan's layer {} shard {} is not an object", layer.name, j + 1));
    const auto where = fmt::format("layer {} shard {}", layer.name, j + 1);
    reader sr{*so, where, diag, {}};
    shard_source s;
    // Without a URL the shard is not in storage yet (its shard line follows): then no digest or size either.
    if (so->contains("url") || so->contains("sha256") || so->contains("bytes")) {
      s.url = sr.text("url");
      s.sha256 = sr.text("sha256");
      s.bytes = sr.number("bytes");
      if (!sr.ec && s.url.empty())
        return bad(diag, fmt::format("the plan's {} has an empty URL", where));
    }
    s.files = sr.number_or("files", 0);
    s.content = sr.number_or("content", 0);
    s.id = sr.text("id");
    if (so->contains("key")) s.key = sr.text("key");
    if (sr.ec) return sr.ec;
    if (so->contains("piece")) {
      if (auto r = read_piece(*so, where, s, diag); !r) return r.error();
    }
    for (auto& c : s.sha256) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : s.id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    layer.shards.push_back(std::move(s));
  }
  if (auto r = check_layer(layer, diag); !r) return r.error();
  return out;
}

result<plan_shard> read_shard(const json::object& so, diagnostics& diag) {
  plan_shard out;
  reader r{so, "shard", diag, {}};
  out.layer = r.text("layer");
  out.index = static_cast<std::size_t>(r.number("index"));
  out.url = r.text("url");
  out.sha256 = r.text("sha256");
  out.bytes = r.number("bytes");
  if (r.ec) return r.ec;
  for (auto& c : out.sha256) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!is_hex(out.layer) || out.layer.size() > 128)
    return bad(diag, fmt::format("the plan's shard line names the layer '{}', which is not hex", out.layer));
  const auto where = fmt::format("shard {} of layer {}", out.index + 1, out.layer.substr(0, 12));
  if (out.sha256.size() != 64 || !is_hex(out.sha256))
    return bad(diag, fmt::format("{} has the digest '{}', which is not a hex SHA-256", where, out.sha256));
  if (out.url.empty() || !one_line(out.url))
    return bad(diag, fmt::format("{} has an empty URL or one with a line break", where));
  return out;
}

// A name the hook compares with what Python asks for: no spaces or control characters (a request is a
// line of words). Python identifiers may be non-ASCII: JSON has already checked such bytes are UTF-8.
bool plain_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) { return c > ' ' && c != 0x7f; });
}

result<std::vector<std::string>> read_names(reader& r, std::string_view key, std::string_view layer) {
  std::vector<std::string> out;
  const auto* list = r.array(key);
  if (r.ec) return r.ec;
  for (const auto& v : *list) {
    if (!v.is_string() || !plain_name(v.get_string()))
      return bad(r.diag, fmt::format("the plan's catalogue names in layer {}'s {} a name with a space or a control character",
                                     layer, key));
    out.emplace_back(v.get_string());
  }
  return out;
}

result<plan_catalogue> read_catalogue(const json::object& co, diagnostics& diag) {
  plan_catalogue out;
  reader r{co, "catalogue", diag, {}};
  const auto* layers = r.array("layers");
  if (co.contains("workspace")) out.workspace = static_cast<std::size_t>(r.number("workspace"));
  if (r.ec) return r.ec;
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto* lo = object_of((*layers)[i]);
    if (!lo) return bad(diag, fmt::format("the plan's catalogue entry {} is not an object", i + 1));
    reader lr{*lo, "catalogue entry", diag, {}};
    catalogue_entry e;
    e.index = static_cast<std::size_t>(lr.number("index"));
    e.id = lr.text("id");
    e.name = lr.text("name");
    e.rank = static_cast<std::size_t>(lr.number_or("rank", i));
    if (lr.ec) return lr.ec;
    if (e.index != i) return bad(diag, fmt::format("the plan's catalogue entry {} has the index {}", i + 1, e.index));
    if (!is_hex(e.id) || e.id.size() > 128)
      return bad(diag, fmt::format("the plan's catalogue gives layer {} the id '{}', which is not hex", e.name, e.id));
    auto modules = read_names(lr, "modules", e.name);
    if (!modules) return modules.error();
    auto dists = read_names(lr, "dists", e.name);
    if (!dists) return dists.error();
    e.modules = std::move(*modules);
    e.dists = std::move(*dists);
    out.layers.push_back(std::move(e));
  }
  if (out.workspace && *out.workspace >= out.layers.size())
    return bad(diag, fmt::format("the catalogue's workspace is layer {} of {}", *out.workspace + 1, out.layers.size()));
  return out;
}

const char* kind_name(site_path_entry::kind k) {
  switch (k) {
    case site_path_entry::kind::layers: return "layers";
    case site_path_entry::kind::stdlib: return "stdlib";
    case site_path_entry::kind::node_site: return "node_site";
    case site_path_entry::kind::raw: return "raw";
  }
  return "raw";
}

result<std::string> read_id(const json::value& v, std::string_view where, diagnostics& diag) {
  if (!v.is_string() || !is_hex(v.get_string()) || v.get_string().size() > 128)
    return bad(diag, fmt::format("the plan's site names in {} a layer id that is not hex", where));
  return std::string(v.get_string());
}

result<site_path_entry> read_site_entry(const json::value& v, std::size_t i, diagnostics& diag) {
  const auto* o = object_of(v);
  const auto where = fmt::format("sys.path entry {}", i + 1);
  if (!o) return bad(diag, fmt::format("the plan's site {} is not an object", where));
  reader r{*o, where, diag, {}};
  site_path_entry e;
  const auto what = r.text("kind");
  if (r.ec) return r.ec;
  if (what == "stdlib") e.what = site_path_entry::kind::stdlib;
  else if (what == "node_site") e.what = site_path_entry::kind::node_site;
  else if (what == "raw") e.what = site_path_entry::kind::raw;
  else if (what == "layers") {
    e.what = site_path_entry::kind::layers;
    const auto* ids = r.array("layers");
    if (r.ec) return r.ec;
    for (const auto& id : *ids) {
      auto got = read_id(id, where, diag);
      if (!got) return got.error();
      e.ids.push_back(std::move(*got));
    }
  } else {
    return bad(diag, fmt::format("the plan's site {} is of the unknown kind '{}'", where, what));
  }
  e.raw = r.text("raw");
  if (r.ec) return r.ec;
  return e;
}

result<plan_site> read_site(const json::object& so, diagnostics& diag) {
  plan_site out;
  reader r{so, "site", diag, {}};
  const auto* path = r.array("path");
  const auto* imports = r.array("imports");
  const auto* dirs = r.array("dirs");
  if (r.ec) return r.ec;
  if (const auto* hide = so.if_contains("hide_node_site")) {
    if (!hide->is_bool()) return bad(diag, "the plan's site.hide_node_site is not true or false");
    out.hide_node_site = hide->get_bool();
  }
  for (std::size_t i = 0; i < path->size(); ++i) {
    auto e = read_site_entry((*path)[i], i, diag);
    if (!e) return e.error();
    out.path.push_back(std::move(*e));
  }
  for (std::size_t i = 0; i < imports->size(); ++i) {
    const auto* o = object_of((*imports)[i]);
    if (!o) return bad(diag, fmt::format("the plan's site import {} is not an object", i + 1));
    reader ir{*o, "site import", diag, {}};
    site_import imp;
    imp.file = ir.text("file");
    imp.line = ir.text("line");
    if (ir.ec) return ir.ec;
    const auto* layer = o->if_contains("layer");
    if (!layer) return bad(diag, fmt::format("the plan's site import {} has no layer", i + 1));
    auto id = read_id(*layer, "an import", diag);
    if (!id) return id.error();
    imp.id = std::move(*id);
    out.imports.push_back(std::move(imp));
  }
  for (std::size_t i = 0; i < dirs->size(); ++i) {
    const auto* o = object_of((*dirs)[i]);
    if (!o || !o->contains("layer")) return bad(diag, fmt::format("the plan's site dir {} is not an object", i + 1));
    reader dr{*o, "site dir", diag, {}};
    site_dir d;
    d.local = dr.text("local");
    if (dr.ec) return dr.ec;
    auto id = read_id(o->at("layer"), "a dir", diag);
    if (!id) return id.error();
    d.id = std::move(*id);
    out.dirs.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::string site_line(const plan_site& site) {
  json::array path;
  for (const auto& e : site.path) {
    json::object o{{"kind", kind_name(e.what)}, {"raw", e.raw}};
    if (e.what == site_path_entry::kind::layers) o["layers"] = json::value_from(e.ids);
    path.push_back(std::move(o));
  }
  json::array imports;
  for (const auto& i : site.imports) imports.push_back(json::object{{"layer", i.id}, {"file", i.file}, {"line", i.line}});
  json::array dirs;
  for (const auto& d : site.dirs) dirs.push_back(json::object{{"local", d.local}, {"layer", d.id}});
  return json::serialize(json::object{{"site", json::object{{"path", std::move(path)},
                                                            {"imports", std::move(imports)},
                                                            {"dirs", std::move(dirs)},
                                                            {"hide_node_site", site.hide_node_site}}}});
}

result<plan_line> parse_plan_line(std::string_view line, diagnostics& diag) {
  json::error_code jec;
  const auto doc = json::parse(line, jec);
  if (jec) return bad(diag, fmt::format("a plan line is not JSON: {}", jec.message()));
  const auto* top = object_of(doc);
  if (!top || top->size() != 1) return bad(diag, "a plan line is not an object of one key");
  const auto& [key, value] = *top->begin();
  const auto* inner = object_of(value);
  if (!inner) return bad(diag, fmt::format("the plan's {} is not an object", std::string_view(key)));
  if (key == "header") {
    auto h = read_header(*inner, diag);
    if (!h) return h.error();
    return plan_line(std::move(*h));
  }
  if (key == "layer") {
    auto l = read_layer(*inner, diag);
    if (!l) return l.error();
    return plan_line(std::move(*l));
  }
  if (key == "shard") {
    auto sh = read_shard(*inner, diag);
    if (!sh) return sh.error();
    return plan_line(std::move(*sh));
  }
  if (key == "end") {
    plan_end e;
    reader r{*inner, "end", diag, {}};
    e.layers = static_cast<std::size_t>(r.number("layers"));
    if (inner->contains("workspace")) e.workspace = static_cast<std::size_t>(r.number("workspace"));
    if (r.ec) return r.ec;
    if (e.workspace && *e.workspace >= e.layers)
      return bad(diag, fmt::format("the workspace is layer {} of a plan of {}", *e.workspace + 1, e.layers));
    return plan_line(e);
  }
  if (key == "catalogue") {
    auto c = read_catalogue(*inner, diag);
    if (!c) return c.error();
    return plan_line(std::move(*c));
  }
  if (key == "site") {
    auto site = read_site(*inner, diag);
    if (!site) return site.error();
    return plan_line(std::move(*site));
  }
  if (key == "work_done") return plan_line(plan_work_done{});
  if (key == "peer") {
    reader r{*inner, "peer", diag, {}};
    plan_peer p{r.text("url")};
    if (r.ec) return r.ec;
    if (!peer_url_ok(p.url)) return bad(diag, fmt::format("the plan's peer '{}' is not http://HOST:PORT", p.url));
    return plan_line(std::move(p));
  }
  return bad(diag, fmt::format("a plan line of the unknown kind '{}'", std::string_view(key)));
}

}  // namespace ferry::agent::node
