#include "packaging/zstd_dictionary.hpp"

#include "packaging/source_file.hpp"
#include "packaging/zip_writer.hpp"

#define ZDICT_STATIC_LINKING_ONLY  // ZDICT_trainFromBuffer_fastCover: fixed parameters, no search
#include <fmt/format.h>
#include <zdict.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ferry::packaging {
namespace {

constexpr std::size_t least_files = 64;
constexpr std::uint64_t least_bytes = 256 << 10;
// Measured (bench/README.md, "zstd dictionaries"): 512 KiB of samples train in about 5 ms, and twice as
// many gain 0.4% more for twice the time. A dictionary of 1/64 of the small files' bytes, between 8 and
// 64 KiB, gains about 1% more than any one size: a small shard cannot pay for a large dictionary.
constexpr std::uint64_t sample_cap = 512 << 10;
constexpr std::uint64_t least_dictionary = 8 << 10;
constexpr std::uint64_t most_dictionary = 64 << 10;

std::size_t dictionary_size(std::uint64_t small_bytes) {
  return static_cast<std::size_t>(std::clamp<std::uint64_t>(small_bytes / 64 / 1024 * 1024, least_dictionary,
                                                            most_dictionary));
}

bool eligible(const file_entry& f) {
  return f.type == file_entry::kind::regular && f.key.size > 0 && f.key.size < dictionary_file_limit &&
         !already_compressed(f.path);
}

// Appends the file's bytes, read as the zip writer reads them (source_file.hpp): a file that vanished or
// changed since it was hashed fails here as it would there, so no dictionary learns from bytes that were not
// hashed.
result<void> read_sample(const file_entry& f, std::string& samples, std::vector<std::size_t>& sizes,
                         diagnostics& diag) {
  auto source = source_file::open(f, diag);
  if (!source) return source.error();
  std::array<char, dictionary_file_limit> buffer;
  const auto start = samples.size();
  for (;;) {
    auto piece = source->read_some(buffer, diag);
    if (!piece) {
      samples.resize(start);
      return piece.error();
    }
    if (piece->empty()) break;
    samples.append(*piece);
  }
  if (samples.size() > start) sizes.push_back(samples.size() - start);
  return {};
}

}  // namespace

result<std::string> train_dictionary(std::span<const file_entry> files, diagnostics& diag) {
  std::vector<const file_entry*> small;
  std::uint64_t total = 0;
  for (const auto& f : files) {
    if (!eligible(f)) continue;
    small.push_back(&f);
    total += f.key.size;
  }
  if (small.size() < least_files || total < least_bytes) return std::string();
  // Every n-th file, so that the sample spans the shard: its first files alone (one subpackage, often)
  // would make a dictionary for them only.
  const auto stride = static_cast<std::size_t>((total + sample_cap - 1) / sample_cap);
  std::string samples;
  samples.reserve(static_cast<std::size_t>(sample_cap + dictionary_file_limit));
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < small.size(); i += stride) {
    if (samples.size() + small[i]->key.size > sample_cap) break;
    if (auto r = read_sample(*small[i], samples, sizes, diag); !r) return r.error();
  }
  ZDICT_fastCover_params_t params{};
  params.k = 1000;  // segment size
  params.d = 8;     // dmer size
  params.f = 17;    // log2 of the frequency table: 6 * 2^17 bytes
  params.accel = 2;
  params.zParams.compressionLevel = 3;  // the entropy tables' level (dictID 0: derived from the content)
  std::string dictionary(dictionary_size(total), '\0');
  const auto made = ZDICT_trainFromBuffer_fastCover(dictionary.data(), dictionary.size(), samples.data(), sizes.data(),
                                                    static_cast<unsigned>(sizes.size()), params);
  // Samples zstd cannot learn from (too few, too alike) leave the shard without a dictionary: not a failure.
  if (ZDICT_isError(made)) return std::string();
  dictionary.resize(made);
  return dictionary;
}

}  // namespace ferry::packaging
