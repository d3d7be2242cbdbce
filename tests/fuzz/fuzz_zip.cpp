// The node program's zip reader on hostile bytes: the end records, the central directory, and the body
// streamed in pieces of the sizes the input chooses, through the same entry-name checks the writer uses.
// A shard comes from storage, so every byte here is the attacker's.
#include "agent/node/entry_name.hpp"
#include "agent/node/zip_directory.hpp"
#include "agent/node/zip_stream.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace node = ferry::agent::node;

namespace {

// Checks every name as the layer writer would and counts what it is handed, without touching the disk.
class checking_sink final : public node::entry_sink {
 public:
  ferry::result<void> begin(const node::zip_entry& entry, ferry::diagnostics& diag) override {
    auto path = node::split_entry_name(entry.name, "fuzz", diag);
    if (!path) return path.error();
    (void)node::printable_name(entry.name);
    expected_ = entry.size;
    got_ = 0;
    return {};
  }
  ferry::result<void> data(std::string_view bytes, ferry::diagnostics&) override {
    got_ += bytes.size();
    if (got_ > expected_) std::abort();  // the stream promised never to pass an entry's size
    return {};
  }
  ferry::result<void> end(ferry::diagnostics&) override { return {}; }

 private:
  std::uint64_t expected_ = 0;
  std::uint64_t got_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte picks the piece size, so the stream is cut at every kind of boundary.
  const std::size_t piece = 1 + data[0] % 64 * 37;
  std::string_view zip(reinterpret_cast<const char*>(data) + 1, size - 1);

  ferry::diagnostics diag;
  const auto tail_start = zip.size() > node::tail_span ? zip.size() - node::tail_span : 0;
  auto tail = node::parse_tail(zip.substr(tail_start), zip.size(), diag);
  if (!tail) return 0;
  if (tail->directory_offset > zip.size() || tail->directory_size > zip.size() - tail->directory_offset) return 0;
  auto entries = node::parse_directory(zip.substr(tail->directory_offset, tail->directory_size), *tail, diag);
  if (!entries) return 0;
  for (const auto& e : *entries) {
    (void)e.is_directory();
    (void)e.is_symlink();
  }

  node::zip_stream stream(std::move(*entries), tail->directory_offset);
  checking_sink sink;
  std::string_view body = zip.substr(0, tail->directory_offset);
  while (!body.empty()) {
    const auto n = std::min(piece, body.size());
    if (!stream.feed(body.substr(0, n), sink, diag)) return 0;
    body.remove_prefix(n);
  }
  (void)stream.finish(diag);
  return 0;
}
