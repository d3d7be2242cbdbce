#pragma once
// The zstd dictionary of a shard (docs/packing.md, "zstd shards"): trained on the shard's small files so
// that each, compressed on its own, compresses as if they shared one stream. Deterministic: the same files
// give the same bytes, and so the same zip and the same digest, whichever machine packs them (fastCover,
// single-threaded, fixed parameters, no search; the dictionary's id is derived from its content).
//
// Training reads a sample of the small files, capped at 512 KiB, spread evenly over the shard (every n-th
// file in path order), so that its cost does not grow with the shard: a site-packages package of thousands
// of small files trains in about 5 ms (bench/bench_zstd_dictionary.cpp). The dictionary is 1/64 of the
// small files' bytes, between 8 and 64 KiB.
#include "packaging/file_entry.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace ferry::packaging {

inline constexpr std::uint64_t dictionary_file_limit = 16 << 10;  // files under this use the dictionary

// The dictionary for `files` (a shard's entries, in path order): "" when it would not pay, with fewer than
// 64 regular files under the limit (not empty, not already compressed: packaging::already_compressed) or
// under 256 KiB of them in all. Symlinks never count. A file that cannot be read is errc::unreadable_file
// naming it. CPU work, synchronous: the caller runs it on the pool.
result<std::string> train_dictionary(std::span<const file_entry> files, diagnostics& diag);

}  // namespace ferry::packaging
