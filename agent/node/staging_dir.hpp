#pragma once
// The disk side of `ferry-node stage`: a node directory that objects are put into whole. Each object is
// written to a file of its own under `<dir>/.ferry-stage/tmp` (mode 0600 while it is written; the
// staging's own directory is 0700, and nothing there holds a URL), checked, then renamed into place, so a
// reader never sees a partial file under its final name. Every directory on an object's way is opened
// relative to its parent with O_NOFOLLOW: an object cannot pass through a symlink out of the directory.
// `<dir>/.ferry-stage/etags/<path>` records the ETag and size each object arrived with, so that a later
// staging of the same objects keeps what is already there.
#include "agent/node/stage_plan.hpp"
#include "packaging/unique_fd.hpp"

#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace ferry::agent::node {

// One object being written, removed on destruction unless it was put in place.
class staged_file {
 public:
  staged_file(int tmp_dir, std::string name, packaging::unique_fd fd);
  staged_file(staged_file&& other) noexcept;
  staged_file& operator=(staged_file&&) = delete;
  ~staged_file();

  // Starts over (a retried download).
  result<void> restart(diagnostics& diag);
  // Appends; a full disk is errc::disk_full with `what` (the object, the directory, the bytes needed).
  result<void> write(std::span<const char> bytes, std::string_view what, diagnostics& diag);
  // Done writing: the descriptor is closed (a staging of many objects holds one open at a time per
  // download), the file waits under its temporary name until it is placed or destroyed.
  void close();

 private:
  friend class staging_dir;
  int tmp_dir_;
  std::string name_;
  packaging::unique_fd fd_;
  bool placed_ = false;
};

class staging_dir {
 public:
  // Creates `path` (and its parents) when missing, and the staging's own files under it; removes what
  // an earlier staging that was killed left behind.
  static result<staging_dir> open(const std::string& path, diagnostics& diag);

  const std::string& path() const { return path_; }
  // The object is there under its path, a regular file of its size, recorded with its ETag.
  bool holds(const stage_object& object) const;
  // Something is still under `path` (the command has not deleted it yet).
  bool present(std::string_view path) const;

  result<staged_file> create(diagnostics& diag);
  // Renames the file into place under the object's path (creating its directories), readable as the
  // umask allows, and records the object's ETag and size.
  result<void> place(staged_file& file, const stage_object& object, diagnostics& diag);

  // `<dir>/.ferry-stage-complete`: with a window, the sign to the command that no more files will come.
  void clear_complete();
  result<void> mark_complete(diagnostics& diag);

 private:
  staging_dir() = default;
  void sweep();

  std::string path_;
  packaging::unique_fd dir_, tmp_, etags_;
  mode_t file_mode_ = 0644;
  unsigned next_ = 0;
};

}  // namespace ferry::agent::node
