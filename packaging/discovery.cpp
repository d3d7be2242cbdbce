#include "packaging/discovery.hpp"

#include "packaging/error.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace ferry::packaging {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using kind = discovery_entry::kind;

constexpr std::string_view marker = "FERRY-PROBE-1 ";

// '' and '.' are taken out of sys.path before the imports, so that a json.py or site.py in the workspace
// cannot shadow what the script needs; the answer still reports sys.path as it was. The answer is written
// as bytes (surrogateescape) so that paths which are not UTF-8 come back unchanged.
constexpr std::string_view script = R"PY(import sys
path = list(sys.path)
sys.path[:] = [p for p in path if p not in ('', '.')]
import json, os, site, sysconfig
impl = sys.implementation
v = sys.version_info
paths = sysconfig.get_paths()
tag = {'cpython': 'cp', 'pypy': 'pp'}.get(impl.name, impl.name)
platform = sysconfig.get_platform().replace('-', '_').replace('.', '_')
answer = {
    'path': path,
    'executable': sys.executable or '',
    'prefix': sys.prefix,
    'base_prefix': getattr(sys, 'base_prefix', sys.prefix),
    'cwd': os.getcwd(),
    'version': '%d.%d.%d' % tuple(v[:3]),
    'cache_tag': impl.cache_tag or '',
    'platform_tag': '%s%d%d-%s' % (tag, v[0], v[1], platform),
    'site_packages': list(site.getsitepackages()) if hasattr(site, 'getsitepackages') else [],
    'user_site': site.getusersitepackages() if site.ENABLE_USER_SITE else None,
    'stdlib': paths.get('stdlib', ''),
    'platstdlib': paths.get('platstdlib', ''),
    'purelib': paths.get('purelib', ''),
    'platlib': paths.get('platlib', ''),
}
sys.stdout.flush()
text = json.dumps(answer, ensure_ascii=False).encode('utf-8', 'surrogateescape')
sys.stdout.buffer.write(b'\nFERRY-PROBE-1 ' + text + b'\n')
sys.stdout.flush()
)PY";

// ---- parsing ---------------------------------------------------------------------------------------------

std::string_view last_marked_line(std::string_view out) {
  std::string_view found;
  while (!out.empty()) {
    const auto end = out.find('\n');
    const auto line = out.substr(0, end);
    if (line.starts_with(marker)) found = line.substr(marker.size());
    if (end == std::string_view::npos) break;
    out.remove_prefix(end + 1);
  }
  return found;
}

// A short, printable excerpt of what the interpreter printed, for the error message.
std::string excerpt(std::string_view text) {
  constexpr std::size_t limit = 200;
  std::string out(text.substr(0, limit));
  std::replace_if(out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return text.size() > limit ? out + "..." : out;
}

class field_reader {
 public:
  field_reader(const json::object& o, diagnostics& diag) : o_(o), diag_(diag) {}

  bool text(std::string_view key, std::string& out) {
    const auto* v = o_.if_contains(key);
    if (!v || !v->is_string()) return fail(key, "a string");
    out = std::string(v->as_string());
    return true;
  }
  bool optional_text(std::string_view key, std::optional<std::string>& out) {
    const auto* v = o_.if_contains(key);
    if (v && v->is_null()) return (out.reset(), true);
    std::string s;
    if (!text(key, s)) return fail(key, "a string or null");
    out = std::move(s);
    return true;
  }
  bool texts(std::string_view key, std::vector<std::string>& out) {
    const auto* v = o_.if_contains(key);
    if (!v || !v->is_array()) return fail(key, "a list of strings");
    out.clear();
    for (const auto& item : v->as_array()) {
      if (!item.is_string()) return fail(key, "a list of strings");
      out.emplace_back(item.as_string());
    }
    return true;
  }

 private:
  bool fail(std::string_view key, std::string_view expected) {
    diag_.set(fmt::format("python's answer about sys.path has no field '{}' that is {}", key, expected));
    return false;
  }

  const json::object& o_;
  diagnostics& diag_;
};

// ---- classification --------------------------------------------------------------------------------------

// Symlinks resolved where the path exists; for the part that does not, as written.
fs::path real_path(const fs::path& p) {
  error_code ec;
  auto real = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : real;
}

bool within(const fs::path& p, const fs::path& dir) {
  if (dir.empty()) return false;
  auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return d == dir.end() || (std::next(d) == dir.end() && d->empty());  // "dir/" ends in an empty name
}

std::set<fs::path> real_paths(std::initializer_list<const std::string*> paths, const std::vector<std::string>& more) {
  std::set<fs::path> out;
  for (const auto* p : paths)
    if (!p->empty()) out.insert(real_path(*p));
  for (const auto& p : more)
    if (!p.empty()) out.insert(real_path(p));
  return out;
}

bool is_stdlib_zip(const fs::path& p) {
  const auto name = p.filename().string();
  return name.size() > 10 && name.starts_with("python") && name.ends_with(".zip") &&
         std::all_of(name.begin() + 6, name.end() - 4, [](char c) { return c >= '0' && c <= '9'; });
}

class classifier {
 public:
  classifier(const probe_answer& a, bool ship_site_packages)
      : ship_site_(ship_site_packages),
        site_(real_paths({&a.purelib, &a.platlib}, a.site_packages)),
        stdlib_(real_paths({&a.stdlib, &a.platstdlib}, {})),
        base_prefix_(a.base_prefix.empty() ? fs::path() : real_path(a.base_prefix)) {
    if (a.user_site) site_.insert(real_path(*a.user_site));
  }

  kind classify(const fs::path& real) const {
    error_code ec;
    const auto st = fs::status(real, ec);
    if (!fs::exists(st)) return is_stdlib(real) ? kind::stdlib : kind::missing;
    if (site_.contains(real)) return ship_site_ ? kind::site_packages : kind::skipped_site_packages;
    if (is_stdlib(real)) return kind::stdlib;
    if (fs::is_regular_file(st)) return kind::zip_file;
    if (fs::is_directory(st)) return kind::other;
    return kind::missing;
  }

 private:
  // The interpreter's own library: sysconfig's stdlib and platstdlib and what lies below them (lib-dynload;
  // Debian's dist-packages below them are site dirs, tested first), and pythonXY.zip or lib-dynload anywhere
  // under base_prefix, where a relocated or embedded build keeps them.
  bool is_stdlib(const fs::path& real) const {
    for (const auto& dir : stdlib_)
      if (within(real, dir)) return true;
    if (!within(real, base_prefix_)) return false;
    return is_stdlib_zip(real) || real.filename() == "lib-dynload";
  }

  bool ship_site_;
  std::set<fs::path> site_;
  std::set<fs::path> stdlib_;
  fs::path base_prefix_;
};

}  // namespace

std::string_view probe_script() { return script; }

result<probe_answer> parse_probe_output(std::string_view out, diagnostics& diag) {
  const auto line = last_marked_line(out);
  if (line.empty()) {
    diag.set(fmt::format("python printed no answer about sys.path; its output began: '{}'", excerpt(out)));
    return make_error_code(errc::bad_probe_output);
  }
  json::parse_options options;
  options.allow_invalid_utf8 = true;  // paths are bytes
  error_code ec;
  auto value = json::parse(json::string_view(line.data(), line.size()), ec, {}, options);
  if (ec) {
    diag.set(fmt::format("python's answer about sys.path is not JSON ({}): '{}'", ec.message(), excerpt(line)));
    return make_error_code(errc::bad_probe_output);
  }
  return parse_probe_answer(value, diag);
}

result<probe_answer> parse_probe_answer(const json::value& value, diagnostics& diag) {
  if (!value.is_object()) {
    diag.set("python's answer about sys.path is not a JSON object");
    return make_error_code(errc::bad_probe_output);
  }
  field_reader r(value.as_object(), diag);
  probe_answer a;
  const bool ok = r.texts("path", a.sys_path) && r.text("executable", a.executable) && r.text("prefix", a.prefix) &&
                  r.text("base_prefix", a.base_prefix) && r.text("cwd", a.cwd) && r.text("version", a.version) &&
                  r.text("cache_tag", a.cache_tag) && r.text("platform_tag", a.platform_tag) &&
                  r.texts("site_packages", a.site_packages) && r.optional_text("user_site", a.user_site) &&
                  r.text("stdlib", a.stdlib) && r.text("platstdlib", a.platstdlib) && r.text("purelib", a.purelib) &&
                  r.text("platlib", a.platlib);
  if (!ok) return make_error_code(errc::bad_probe_output);
  return a;
}

json::object to_json(const probe_answer& a) {
  auto strings = [](const std::vector<std::string>& v) {
    json::array out;
    for (const auto& s : v) out.emplace_back(s);
    return out;
  };
  json::object o;
  o["path"] = strings(a.sys_path);
  o["executable"] = a.executable;
  o["prefix"] = a.prefix;
  o["base_prefix"] = a.base_prefix;
  o["cwd"] = a.cwd;
  o["version"] = a.version;
  o["cache_tag"] = a.cache_tag;
  o["platform_tag"] = a.platform_tag;
  o["site_packages"] = strings(a.site_packages);
  if (a.user_site)
    o["user_site"] = *a.user_site;
  else
    o["user_site"] = nullptr;
  o["stdlib"] = a.stdlib;
  o["platstdlib"] = a.platstdlib;
  o["purelib"] = a.purelib;
  o["platlib"] = a.platlib;
  return o;
}

bool discovery_entry::shipped() const {
  return what == kind::workspace || what == kind::site_packages || what == kind::other || what == kind::zip_file;
}

std::string_view to_string(discovery_entry::kind k) {
  switch (k) {
    case kind::workspace: return "workspace";
    case kind::site_packages: return "site_packages";
    case kind::other: return "other";
    case kind::stdlib: return "stdlib";
    case kind::missing: return "missing";
    case kind::zip_file: return "zip_file";
    case kind::skipped_site_packages: return "skipped_site_packages";
  }
  return "unknown";
}

std::vector<const discovery_entry*> discovery::shipped() const {
  std::vector<const discovery_entry*> out;
  for (const auto& e : entries)
    if (e.shipped()) out.push_back(&e);
  return out;
}

fs::path absolute_in(const std::string& entry, const fs::path& base) {
  if (entry.empty()) return base;
  return (base / fs::path(entry)).lexically_normal();  // an absolute entry replaces the base
}

result<discovery> classify(const probe_answer& answer, const fs::path& workspace, bool ship_site_packages,
                           diagnostics& diag) {
  error_code ec;
  const auto root = fs::absolute(workspace, ec).lexically_normal();
  const auto root_real = ec ? fs::path() : fs::canonical(root, ec);
  if (ec || !fs::is_directory(root_real, ec)) {
    diag.set(fmt::format("the workspace {} is not a directory", workspace.string()));
    return make_error_code(errc::not_a_directory);
  }

  discovery out;
  out.version = answer.version;
  out.platform_tag = answer.platform_tag;
  out.cache_tag = answer.cache_tag;
  out.executable = answer.executable;
  // Python may leave the workspace out (PYTHONSAFEPATH, -P); ferry ships it regardless, first.
  out.entries.push_back({root, root_real, kind::workspace});
  std::set<fs::path> seen{root_real};

  const classifier sort(answer, ship_site_packages);
  for (const auto& raw : answer.sys_path) {
    auto path = absolute_in(raw, root);
    auto real = real_path(path);
    if (!seen.insert(real).second) continue;  // a duplicate, maybe through a symlink: the first one wins
    const auto what = sort.classify(real);
    discovery_entry e{std::move(path), std::move(real), what};
    if (e.what == kind::other && within(e.real_path, root_real)) {
      e.inside_workspace = true;
      out.notes.push_back(fmt::format(
          "sys.path entry {} lies inside the workspace: its files ship with the workspace and as an entry of "
          "their own",
          e.path.string()));
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

}  // namespace ferry::packaging
