#pragma once
// Which layer each file of a site-packages directory belongs to. Sans-io: the caller reads the RECORD
// files of the *.dist-info directories and hands them in.
//
// A distribution's layer holds every file its RECORD lists (its packages, its .dist-info, its .libs
// companion, its .pth files), so upgrading one distribution changes one layer, and namespace packages
// shared by several distributions (google/, azure/) are split by owner. An egg (.egg-info, no RECORD: Debian's
// packages, older installs) owns the top-level names its top_level.txt lists, and the NAME-VERSION-nspkg.pth
// file setuptools wrote for it, whose line finds the namespace package beside itself. A file no record lists
// goes with the distribution that owns the rest of its top-level name, or else forms a layer named after it.
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ferry::packaging {

class distribution_index {
 public:
  // `dist_info_dir` is the directory's name, e.g. "numpy-1.26.4.dist-info", and `record_text` its RECORD
  // (or, for an .egg-info directory, its top_level.txt: a name a line). Add every one first, then ask
  // group_of().
  void add_record(std::string_view dist_info_dir, std::string_view record_text);

  // The layer name for a path relative to site-packages: a normalised distribution name ("numpy",
  // "typing-extensions") or the stem of an unowned top-level name.
  std::string group_of(std::string_view path) const;

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using string_map = std::unordered_map<std::string, std::string, string_hash, std::equal_to<>>;

  void index_shared_tops() const;

  // RECORD lines kept until group_of() needs them: only names shared by several distributions need a
  // per-file owner, and most site-packages have few such namespaces.
  std::vector<std::pair<std::string, std::string>> records_;  // (distribution, RECORD text)
  string_map top_owner_;       // top-level name -> distribution, "" if shared
  std::unordered_set<std::string, string_hash, std::equal_to<>> dists_;  // every distribution added
  mutable string_map owner_;   // path -> distribution, for paths under shared names only
  mutable bool indexed_ = false;
};

// "Typing_Extensions" -> "typing-extensions" (PEP 503).
std::string normalize_distribution(std::string_view name);
// "numpy-1.26.4.dist-info" -> "numpy"; "" when the name is not a .dist-info or .egg-info directory.
std::string distribution_of_metadata_dir(std::string_view dir);
// "six.py" -> "six", "_cffi_backend.cpython-311-x86_64-linux-gnu.so" -> "_cffi_backend", "numpy.libs" -> "numpy".
std::string top_level_stem(std::string_view name);

}  // namespace ferry::packaging
