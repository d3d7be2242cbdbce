#pragma once
// Writes a zip's entries into a layer's directory, confined to it: every directory on the way is created
// or opened relative to its parent's descriptor with O_NOFOLLOW, so an entry can never pass through a
// symlink (one made by an earlier entry or another shard of the layer) to land outside; files are created
// with O_EXCL, so an entry cannot overwrite another. Symlinks are made only with relative targets that stay
// inside the layer. Modes come from the zip, without set-id bits.
//
// A full disk is errc::disk_full naming the layer's directory and the bytes still needed.
#include "agent/node/zip_stream.hpp"
#include "packaging/unique_fd.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <sys/types.h>
#include <vector>

namespace ferry::agent::node {

// The process's umask, read without changing it (umask(2) would, for every thread).
mode_t process_umask();

class layer_writer final : public entry_sink {
 public:
  // `root` is the layer's (temporary) directory, open; `root_path` and `layer` name it in messages;
  // `layer_bytes` is what the whole layer holds, for the message of a full disk.
  layer_writer(int root, std::string root_path, std::string layer, std::uint64_t layer_bytes);

  // This writer's shard is a piece of a large file (plan.hpp): its one regular entry, whose name the fetch
  // checked is the plan's, goes at `offset` of the file, which the layer's other pieces share. So the file
  // is opened, not created exclusively, and only its owner may write it until every piece is in (then
  // set_mode gives it its own mode, which may be read-only). undo() leaves the file: the bytes a failed
  // piece wrote stay within its own range, which the piece fetched again writes over; a layer that fails
  // for good is removed whole.
  void write_as_piece(std::uint64_t offset) { piece_offset_ = offset; }
  // After a piece was written: its file and the mode it should end with.
  std::optional<std::pair<std::string, mode_t>> piece_file() const { return piece_file_; }
  // Sets the mode of the regular file `name` below `root`, passing through no symlink.
  static result<void> set_mode(int root, std::string_view name, mode_t mode, std::string_view layer,
                               diagnostics& diag);

  result<void> begin(const zip_entry& entry, diagnostics& diag) override;
  result<void> data(std::string_view bytes, diagnostics& diag) override;
  result<void> end(diagnostics& diag) override;

  std::uint64_t bytes_written() const { return bytes_written_; }
  std::uint64_t files_written() const { return files_written_; }

  // Removes what this writer made: its files and symlinks, then the directories it created that are empty
  // (another shard's files keep theirs). A shard that failed is then fetched again into the same
  // directory, beside the shards that succeeded, which stay. Confined as writing is: no component is
  // followed through a symlink.
  void undo();

 private:
  // Opens (creating what is missing) the directories `dirs` below the root; the descriptor of the last.
  result<void> open_piece(const zip_entry& entry, diagnostics& diag);
  result<int> open_dirs(const std::vector<std::string_view>& dirs, std::string_view name, diagnostics& diag);
  error_code io_failure(int err, std::string_view doing, std::string_view name, diagnostics& diag);
  error_code hostile(std::string_view name, std::string_view why, diagnostics& diag);

  int root_;
  std::string root_path_;
  std::string layer_;
  std::uint64_t layer_bytes_;
  std::vector<std::pair<std::string, packaging::unique_fd>> open_;  // the directories of the last entry
  const zip_entry* entry_ = nullptr;
  int parent_ = -1;
  std::string leaf_;
  packaging::unique_fd file_;
  std::string link_target_;
  std::optional<std::uint64_t> piece_offset_;
  std::optional<std::pair<std::string, mode_t>> piece_file_;
  std::uint64_t at_ = 0;  // where the next byte of the entry goes in its file
  std::uint64_t bytes_written_ = 0;
  std::uint64_t files_written_ = 0;
  // What undo() removes, as '/'-joined paths below the root, in the order they were made.
  std::vector<std::string> made_files_;
  std::vector<std::string> made_dirs_;
};

}  // namespace ferry::agent::node
