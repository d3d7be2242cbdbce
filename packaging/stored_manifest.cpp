#include "packaging/stored_manifest.hpp"

#include "packaging/error.hpp"
#include "packaging/zip_digest.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace ferry::packaging {
namespace {

namespace json = boost::json;

constexpr std::string_view format_name = "ferry-manifest-v1";

// Reads the fields of one JSON object, saying which one is wrong (and where) the first time one is.
class fields {
 public:
  fields(const json::object& o, std::string where, diagnostics& diag) : o_(o), where_(std::move(where)), diag_(diag) {}

  const std::string& where() const { return where_; }

  const json::value* find(std::string_view name) {
    const auto* v = o_.if_contains(name);
    if (!v) fail(name, "is missing");
    return v;
  }
  std::optional<std::string> text(std::string_view name) {
    const auto* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
      fail(name, "is not a string");
      return std::nullopt;
    }
    return std::string(v->get_string());
  }
  std::optional<std::uint64_t> count(std::string_view name) {
    const auto* v = find(name);
    if (!v) return std::nullopt;
    if (v->is_uint64()) return v->get_uint64();
    if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
    fail(name, "is not a whole number of at least 0");
    return std::nullopt;
  }
  std::optional<std::string> hex_digest(std::string_view name) {
    auto t = text(name);
    if (t && !parse_hex_digest(*t)) {
      fail(name, "is not 64 lowercase hex digits");
      return std::nullopt;
    }
    return t;
  }
  const json::array* array(std::string_view name) {
    const auto* v = find(name);
    if (v && !v->is_array()) fail(name, "is not an array");
    return v && v->is_array() ? &v->get_array() : nullptr;
  }
  const json::object* object(std::string_view name) {
    const auto* v = find(name);
    if (v && !v->is_object()) fail(name, "is not an object");
    return v && v->is_object() ? &v->get_object() : nullptr;
  }
  bool has(std::string_view name) const { return o_.contains(name); }

  void fail(std::string_view name, std::string_view what) {
    diag_.set(fmt::format("manifest: {}{}{} {}", where_, where_.empty() ? "" : ".", name, what));
  }

 private:
  const json::object& o_;
  std::string where_;
  diagnostics& diag_;
};

// `items[i]` as an object, or the reason it is not one.
const json::object* element(const json::array& items, std::size_t i, const std::string& where, diagnostics& diag) {
  if (!items[i].is_object()) diag.set(fmt::format("manifest: {}[{}] is not an object", where, i));
  return items[i].if_object();
}

error_code bad() { return make_error_code(errc::bad_manifest); }

result<stored_shard> read_shard(const json::object& o, std::string where, diagnostics& diag) {
  fields f(o, std::move(where), diag);
  // Said apart from any other fault: it is what an older ferry's manifest looks like, and what to do is known.
  if (!f.has("sha256") || !f.has("zip_bytes")) {
    diag.set(fmt::format("manifest: {} lacks the digest of its zip (\"sha256\" and \"zip_bytes\"): it was stored by "
                         "an older ferry, and no download could be checked against it; `ferry pack` stores it again "
                         "with them",
                         f.where()));
    return bad();
  }
  auto id = f.hex_digest("id");
  auto key = id ? f.text("key") : std::nullopt;
  auto files = key ? f.count("files") : std::nullopt;
  auto bytes = files ? f.count("bytes") : std::nullopt;
  auto sha256 = bytes ? f.hex_digest("sha256") : std::nullopt;
  auto zip_bytes = sha256 ? f.count("zip_bytes") : std::nullopt;
  if (!zip_bytes) return bad();
  return stored_shard{std::move(*id), std::move(*key), *files, *bytes, std::move(*sha256), *zip_bytes};
}

result<stored_layer> read_layer(const json::object& o, std::string where, diagnostics& diag) {
  fields f(o, std::move(where), diag);
  auto name = f.text("name");
  auto root = name ? f.count("root") : std::nullopt;
  auto id = root ? f.hex_digest("id") : std::nullopt;
  auto files = id ? f.count("files") : std::nullopt;
  auto bytes = files ? f.count("bytes") : std::nullopt;
  const auto* shards = bytes ? f.array("shards") : nullptr;
  if (!shards) return bad();
  if (shards->empty()) {
    f.fail("shards", "is empty");
    return bad();
  }
  stored_layer l{std::move(*name), *root, std::move(*id), *files, *bytes, {}};
  const auto shards_at = f.where() + ".shards";
  for (std::size_t i = 0; i < shards->size(); ++i) {
    const auto* s = element(*shards, i, shards_at, diag);
    if (!s) return bad();
    auto shard = read_shard(*s, fmt::format("{}[{}]", shards_at, i), diag);
    if (!shard) return shard.error();
    l.shards.push_back(std::move(*shard));
  }
  return l;
}

result<stored_root> read_root(const json::object& o, std::string where, diagnostics& diag) {
  fields f(o, std::move(where), diag);
  auto index = f.count("index");
  auto kind = index ? f.text("kind") : std::nullopt;
  auto path = kind ? f.text("path") : std::nullopt;
  if (!path) return bad();
  if (*kind != "workspace" && *kind != "site-packages" && *kind != "path") {
    f.fail("kind", fmt::format("is \"{}\", not workspace, site-packages or path", *kind));
    return bad();
  }
  return stored_root{*index, std::move(*kind), std::move(*path)};
}

result<void> read_python(fields& top, stored_manifest& out, diagnostics& diag) {
  const auto* python = top.object("python");
  if (!python) return bad();
  fields f(*python, "python", diag);
  auto version = f.text("version");
  auto platform = version ? f.text("platform") : std::nullopt;
  if (!platform) return bad();
  out.python_version = std::move(*version);
  out.python_platform = std::move(*platform);
  return {};
}

}  // namespace

result<stored_manifest> parse_manifest(std::string_view text, diagnostics& diag) {
  json::parse_options options;
  options.allow_invalid_utf8 = true;  // paths and layer names are bytes
  error_code ec;
  const auto doc = json::parse(text, ec, {}, options);
  if (ec) {
    diag.set(fmt::format("manifest: not JSON ({})", ec.message()));
    return bad();
  }
  if (!doc.is_object()) {
    diag.set("manifest: not a JSON object");
    return bad();
  }
  fields top(doc.get_object(), "", diag);
  const auto format = top.text("format");
  if (!format) return bad();
  if (*format != format_name) {
    top.fail("format", fmt::format("is \"{}\", not {}", *format, format_name));
    return bad();
  }
  stored_manifest out;
  if (auto r = read_python(top, out, diag); !r) return r.error();
  const auto* roots = top.array("roots");
  const auto* layers = roots ? top.array("layers") : nullptr;
  if (!layers) return bad();
  for (std::size_t i = 0; i < roots->size(); ++i) {
    const auto* o = element(*roots, i, "roots", diag);
    if (!o) return bad();
    auto root = read_root(*o, fmt::format("roots[{}]", i), diag);
    if (!root) return root.error();
    out.roots.push_back(std::move(*root));
  }
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto* o = element(*layers, i, "layers", diag);
    if (!o) return bad();
    auto layer = read_layer(*o, fmt::format("layers[{}]", i), diag);
    if (!layer) return layer.error();
    const auto root = layer->root;
    // A layer extracts into one of the roots: one naming no root could not be placed on a node.
    if (std::none_of(out.roots.begin(), out.roots.end(), [root](const auto& r) { return r.index == root; })) {
      diag.set(fmt::format("manifest: layers[{}].root is {}, but no root has that index", i, root));
      return bad();
    }
    out.layers.push_back(std::move(*layer));
  }
  return out;
}

}  // namespace ferry::packaging
