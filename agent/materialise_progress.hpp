#pragma once
// The progress protocol of the node-side materialise script (agent/materialise_script.inc), read without
// I/O: the script's stdout goes in as it arrives, in chunks cut anywhere, and complete lines come out as
// events. Lines look like
//   @ferry begin <layer> <step> <shard>          a step starts (layer "-": the cache as a whole)
//   @ferry end <layer> <step> <shard> <bytes>    it succeeded
//   @ferry fail <layer> <step> <shard> <message> it failed, with the node's words
//   @ferry cache <dir> | cached <layer> | fetched <layer> <zip bytes> <disk bytes> |
//   @ferry evicted <layer> <disk bytes> | missing <tool>... | ready <workdir>
// A line that starts with "@ferry " but does not fit is `malformed` (never a guess at what it meant); any
// other line is `other`. A last line without its newline (the stream was cut) is malformed too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent {

struct progress_event {
  enum class kind { cache, begin, end, fail, cached, fetched, evicted, missing, ready, malformed, other };

  kind what = kind::other;
  std::string layer;  // a layer id, or "-" for a step of the cache as a whole
  std::string step;   // lock, download, verify, unzip, place, cache
  std::size_t shard = 0;
  std::uint64_t bytes = 0;       // end: the step's bytes; fetched: the zip bytes downloaded
  std::uint64_t disk_bytes = 0;  // fetched, evicted
  std::string text;  // fail: the message; cache, ready: the directory; missing: the tools; malformed, other: the line
};

class progress_parser {
 public:
  // Lines longer than this are cut, and malformed: the script writes none.
  static constexpr std::size_t max_line = 16 * 1024;

  std::vector<progress_event> feed(std::string_view bytes);
  // The end of the stream.
  std::vector<progress_event> finish();

 private:
  void complete_line(std::vector<progress_event>& out);

  std::string line_;
  bool overlong_ = false;
};

// One complete line, without its newline.
progress_event parse_progress_line(std::string_view line);

}  // namespace ferry::agent
