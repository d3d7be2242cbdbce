#pragma once
// Reading the ignore files themselves: small files, read whole, where a missing or unreadable one is simply
// empty (git treats them the same way).
#include <string>

namespace ferry::packaging {

struct ignore_file_contents {
  std::string text;        // "" when absent, unreadable or not read
  bool symlink = false;    // not read because it is a symlink
};

// `name` relative to the directory `dirfd` (or AT_FDCWD and a path). Per-directory ignore files are read
// with `follow_symlink` false: git opens them with O_NOFOLLOW and ignores one that is a symlink.
ignore_file_contents read_ignore_file(int dirfd, const char* name, bool follow_symlink);

}  // namespace ferry::packaging
