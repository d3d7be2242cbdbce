#pragma once
// Which directories of sys.path ferry ships. Sans-io except for stat: the interpreter is asked once (see
// python_probe.hpp) with probe_script(), its answer is parsed here into a probe_answer, and classify() sorts
// every sys.path entry into what ships (the workspace, site-packages, other directories, zip files) and what
// does not (the interpreter's own stdlib, entries that do not exist, site-packages when
// packaging.ship_site_packages is off).
#include "tracing/diagnostics.hpp"

#include <boost/json/value.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

// A `.pth` file that `site` ran at start-up, and the lines of it that it executed ("import ..."). Its path
// lines need no record: what they added is in sys.path already.
struct pth_file {
  std::string dir;                   // the site directory that holds it
  std::string name;                  // "distutils-precedence.pth"
  std::vector<std::string> imports;  // in file order

  bool operator==(const pth_file&) const = default;
};

// What the interpreter says about itself, as probe_script() prints it. Strings are paths as bytes: a path
// that is not UTF-8 travels unchanged.
struct probe_answer {
  std::vector<std::string> sys_path;  // in order; "" is the working directory
  std::string executable;             // sys.executable ("" when Python could not tell)
  std::string prefix;                 // sys.prefix: a venv's directory inside one
  std::string base_prefix;            // sys.base_prefix: the installation the stdlib comes from
  std::string cwd;                    // os.getcwd(): what "" stands for
  std::string version;                // "3.11.7"
  std::string cache_tag;              // sys.implementation.cache_tag: "cpython-311"
  std::string platform_tag;           // "cp311-linux_x86_64", see probe_script()
  std::vector<std::string> site_packages;  // site.getsitepackages()
  std::optional<std::string> user_site;    // site.getusersitepackages() when site.ENABLE_USER_SITE
  std::string stdlib, platstdlib, purelib, platlib;  // sysconfig.get_paths()
  std::vector<pth_file> pth;          // in the order `site` ran them: site directory by directory, by name
  // Where setuptools' editable finders (__editable___*_finder, PEP 660) import packages from: their
  // MAPPING's and NAMESPACES' paths, which need not lie on sys.path.
  std::vector<std::string> editable;
  std::string implementation;  // sys.implementation.name: "cpython"
  std::string machine;         // platform.machine(): "x86_64"
  std::string soabi;           // sysconfig's SOABI: "cpython-311-x86_64-linux-gnu"
  // Each installed wheel with manylinux tags, and the glibc it needs ("2.17"): {distribution, version}.
  std::vector<std::pair<std::string, std::string>> wheel_glibc;

  bool operator==(const probe_answer&) const = default;
};

// The Python program the probe runs with `python -c`. Its last line of output is
// "FERRY-PROBE-1 " followed by one JSON object (anything a sitecustomize printed before it is ignored).
// The platform tag is "{impl}{major}{minor}-{platform}": impl "cp" for CPython, "pp" for PyPy, else
// sys.implementation.name; platform is sysconfig.get_platform() with '-' and '.' made '_', as in wheel
// tags. It says which nodes can load compiled extensions from site-packages; the ABI flags are left out.
std::string_view probe_script();

// The probe's stdout into an answer: bad_probe_output (with what was wrong in `diag`) when there is no
// marked line, the JSON does not parse, or a field is missing or of the wrong type.
result<probe_answer> parse_probe_output(std::string_view out, diagnostics& diag);

// The answer as the JSON object probe_script() prints; parse_probe_answer() reads it back (used by the cache).
boost::json::object to_json(const probe_answer& answer);
result<probe_answer> parse_probe_answer(const boost::json::value& json, diagnostics& diag);

struct discovery_entry {
  enum class kind {
    workspace,              // the project root: always first, always shipped
    site_packages,          // a site-packages or dist-packages directory: shipped
    other,                  // any other directory (PYTHONPATH, .pth additions): shipped
    stdlib,                 // the interpreter's own library: nodes have their own, never shipped
    missing,                // does not exist (or is neither a directory nor a file): nothing to ship
    zip_file,               // a regular file (egg, zip): shipped as it is
    skipped_site_packages,  // site-packages while packaging.ship_site_packages is false
  };
  std::filesystem::path path;       // absolute, as sys.path names it ("" made the workspace)
  std::filesystem::path real_path;  // symlinks resolved: what duplicates are recognised by
  kind what = kind::other;
  bool inside_workspace = false;  // an `other` entry below the workspace root: its files also ship with it
  // Not on sys.path: a directory an editable install imports from (probe_answer::editable), shipped so
  // that the node can point the finder at it. Such entries come after every sys.path entry.
  bool off_path = false;

  bool shipped() const;
};

std::string_view to_string(discovery_entry::kind k);

// One place of the local sys.path after the script's own (which Python puts first on the node too): the
// entry it names, as an index into discovery::entries, or none for a string that names no directory
// (setuptools' "__editable__.*.__path_hook__" placeholder, an entry that does not exist).
struct path_slot {
  std::string raw;                    // as sys.path holds it
  std::optional<std::size_t> entry;   // into discovery::entries

  bool operator==(const path_slot&) const = default;
};

struct discovery {
  std::vector<discovery_entry> entries;  // sys.path order, the workspace first, no duplicates
  std::vector<path_slot> sys_path;       // the local sys.path itself, entry for entry, duplicates and all
  std::vector<pth_file> pth;             // as the probe reported them
  std::string version;
  std::string platform_tag;
  std::string cache_tag;
  std::string implementation, machine, soabi;
  std::vector<std::pair<std::string, std::string>> wheel_glibc;  // as probe_answer has them
  std::filesystem::path executable;
  std::vector<std::string> notes;  // things a person may want to know, e.g. an entry inside the workspace

  // The entries that ship, in order.
  std::vector<const discovery_entry*> shipped() const;
};

// A sys.path entry as a path: relative ones are under `base` (the directory Python ran in, where an empty
// entry points), absolute ones stand; `.` and `..` resolved lexically.
std::filesystem::path absolute_in(const std::string& entry, const std::filesystem::path& base);

// Sorts the answer's sys.path entries. `workspace` is the project root, the directory the probe ran in.
// Fails with not_a_directory only when the workspace is not a directory.
result<discovery> classify(const probe_answer& answer, const std::filesystem::path& workspace,
                           bool ship_site_packages, diagnostics& diag);

}  // namespace ferry::packaging
