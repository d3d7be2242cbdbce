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
# The .pth files site ran, in its order (the user site, then each site directory; names sorted), with
# the lines it executed: reading them as site.addpackage does.
def pth_files():
    dirs = []
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    if hasattr(site, 'getsitepackages'):
        dirs += [d for d in site.getsitepackages() if os.path.isdir(d)]
    out, seen = [], set()
    for d in dirs:
        if os.path.normcase(os.path.abspath(d)) in seen:
            continue
        seen.add(os.path.normcase(os.path.abspath(d)))
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith('.pth') and not n.startswith('.'))
        except OSError:
            continue
        for n in names:
            try:
                with open(os.path.join(d, n), 'rb') as f:
                    lines = f.read().decode('utf-8', 'surrogateescape').splitlines(True)
            except OSError:
                continue
            imports = [l for l in lines if l.startswith(('import ', 'import\t'))]
            out.append({'dir': d, 'name': n, 'imports': imports})
    return out
def editable_paths():
    out = []
    for name, m in sorted(sys.modules.items(), key=lambda kv: kv[0]):
        if not (name.startswith('__editable__') and name.endswith('_finder')):
            continue
        out += [str(p) for p in dict(getattr(m, 'MAPPING', None) or {}).values()]
        for ps in dict(getattr(m, 'NAMESPACES', None) or {}).values():
            out += [str(p) for p in ps]
    return out
# The glibc each installed wheel needs, from its manylinux tags: a wheel runs where any one of its tags
# does, so the oldest glibc among them.
def wheel_glibc():
    legacy = {'manylinux1': (2, 5), 'manylinux2010': (2, 12), 'manylinux2014': (2, 17)}
    out = []
    for d in [d for d in site.getsitepackages() if os.path.isdir(d)] if hasattr(site, 'getsitepackages') else []:
        for n in sorted(os.listdir(d)):
            if not n.endswith('.dist-info'):
                continue
            try:
                with open(os.path.join(d, n, 'WHEEL'), 'rb') as f:
                    tags = [l.split(b':', 1)[1].strip().decode('ascii', 'replace') for l in f if l.startswith(b'Tag:')]
            except (OSError, IndexError):
                continue
            need = None
            for t in tags:
                for p in t.split('-')[-1].split('.'):
                    parts = p.split('_')
                    if parts[0] in legacy:
                        v = legacy[parts[0]]
                    elif parts[0] == 'manylinux' and len(parts) >= 4 and parts[1].isdigit() and parts[2].isdigit():
                        v = (int(parts[1]), int(parts[2]))
                    else:
                        continue
                    if need is None or v < need:
                        need = v
            if need is not None:
                out.append([n[:-len('.dist-info')].rsplit('-', 1)[0], '%d.%d' % need])
    return out
import platform
answer['implementation'] = impl.name
answer['machine'] = platform.machine()
answer['soabi'] = sysconfig.get_config_var('SOABI') or ''
answer['wheel_glibc'] = wheel_glibc()
answer['pth'] = pth_files()
answer['editable'] = editable_paths()
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
  bool pairs(std::string_view key, std::vector<std::pair<std::string, std::string>>& out) {
    const auto* v = o_.if_contains(key);
    if (!v || !v->is_array()) return fail(key, "a list of pairs of strings");
    out.clear();
    for (const auto& item : v->as_array()) {
      const auto* a = item.if_array();
      if (!a || a->size() != 2 || !(*a)[0].is_string() || !(*a)[1].is_string())
        return fail(key, "a list of pairs of strings");
      out.emplace_back(std::string((*a)[0].as_string()), std::string((*a)[1].as_string()));
    }
    return true;
  }
  bool pth_files(std::string_view key, std::vector<pth_file>& out) {
    const auto* v = o_.if_contains(key);
    if (!v || !v->is_array()) return fail(key, "a list of .pth files");
    out.clear();
    for (const auto& item : v->as_array()) {
      const auto* o = item.if_object();
      if (!o) return fail(key, "a list of .pth files");
      field_reader r(*o, diag_);
      pth_file f;
      if (!r.text("dir", f.dir) || !r.text("name", f.name) || !r.texts("imports", f.imports)) return false;
      out.push_back(std::move(f));
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

std::optional<std::size_t> entry_of(const discovery& d, const fs::path& real) {
  for (std::size_t i = 0; i < d.entries.size(); ++i)
    if (d.entries[i].real_path == real) return i;
  return std::nullopt;
}

// What an editable install imports from and no shipped entry holds: a directory of its own each (a module
// file's directory), shipped off the path.
void add_editable_targets(const probe_answer& answer, discovery& out) {
  for (const auto& target : answer.editable) {
    if (target.empty() || target.front() != '/') continue;  // a finder's own placeholder, not a place
    auto real = real_path(target);
    error_code ec;
    if (!fs::is_directory(real, ec)) real = real.parent_path();
    if (!fs::is_directory(real, ec)) continue;
    const bool held = std::any_of(out.entries.begin(), out.entries.end(), [&](const discovery_entry& e) {
      return e.shipped() && within(real, e.real_path);
    });
    if (held) continue;
    discovery_entry e{real, real, kind::other};
    e.off_path = true;
    out.entries.push_back(std::move(e));
  }
}

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
                  r.text("platlib", a.platlib) && r.pth_files("pth", a.pth) && r.texts("editable", a.editable) &&
                  r.text("implementation", a.implementation) && r.text("machine", a.machine) &&
                  r.text("soabi", a.soabi) && r.pairs("wheel_glibc", a.wheel_glibc);
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
  json::array pth;
  for (const auto& f : a.pth)
    pth.emplace_back(json::object{{"dir", f.dir}, {"name", f.name}, {"imports", strings(f.imports)}});
  o["pth"] = std::move(pth);
  o["editable"] = strings(a.editable);
  o["implementation"] = a.implementation;
  o["machine"] = a.machine;
  o["soabi"] = a.soabi;
  json::array glibc;
  for (const auto& [dist, version] : a.wheel_glibc) glibc.emplace_back(json::array{json::value(dist), json::value(version)});
  o["wheel_glibc"] = std::move(glibc);
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
  out.implementation = answer.implementation;
  out.machine = answer.machine;
  out.soabi = answer.soabi;
  out.wheel_glibc = answer.wheel_glibc;
  out.executable = answer.executable;
  // Python may leave the workspace out (PYTHONSAFEPATH, -P); ferry ships it regardless, first.
  out.entries.push_back({root, root_real, kind::workspace});
  std::set<fs::path> seen{root_real};

  const classifier sort(answer, ship_site_packages);
  // `python -c` put '' first, for the script's directory: on the node, Python puts the script's own there.
  const bool script_slot = !answer.sys_path.empty() && answer.sys_path.front().empty();
  for (std::size_t i = 0; i < answer.sys_path.size(); ++i) {
    const auto& raw = answer.sys_path[i];
    auto path = absolute_in(raw, root);
    auto real = real_path(path);
    if (i > 0 || !script_slot) out.sys_path.push_back({raw, entry_of(out, real)});
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
    if (i > 0 || !script_slot) out.sys_path.back().entry = out.entries.size();
    out.entries.push_back(std::move(e));
  }
  add_editable_targets(answer, out);
  out.pth = answer.pth;
  return out;
}

}  // namespace ferry::packaging
