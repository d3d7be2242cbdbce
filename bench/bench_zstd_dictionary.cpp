// The zstd dictionary of a shard (packaging/zstd_dictionary.hpp) on real trees: this machine's Python
// site-packages by default, or the directories given. Each top-level package stands for a shard. For each,
// the bytes of its small files (under dictionary_file_limit, as ferry walks them: no __pycache__) each
// compressed on its own at zstd level 3, alone and with the dictionary (whose own size is added), and the
// time training took (best of 3). Packages too small for a dictionary are counted apart.
#include "packaging/tree_walker.hpp"
#include "packaging/zip_writer.hpp"
#include "packaging/zstd_dictionary.hpp"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ferry;
namespace fs = std::filesystem;

namespace {

struct totals {
  std::uint64_t packages = 0, files = 0, input = 0, alone = 0, with = 0, dictionaries = 0;
  double train_ms = 0, slowest_ms = 0;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void measure(const fs::path& root, const std::string& package, const std::vector<packaging::file_entry>& files,
             totals& t, totals& none) {
  diagnostics diag;
  std::string dict;
  double best = 1e9;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    auto d = packaging::train_dictionary(files, diag);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!d) throw std::runtime_error(diag.message);
    dict = std::move(*d);
  }
  auto* cctx = ZSTD_createCCtx();
  auto* cdict = dict.empty() ? nullptr : ZSTD_createCDict(dict.data(), dict.size(), 3);
  std::string out(ZSTD_compressBound(packaging::dictionary_file_limit), '\0');
  std::uint64_t n = 0, input = 0, alone = 0, with = 0;
  for (const auto& f : files) {
    if (f.type != packaging::file_entry::kind::regular || f.key.size == 0 ||
        f.key.size >= packaging::dictionary_file_limit || packaging::already_compressed(f.path))
      continue;
    const auto data = slurp(f.source);
    ++n;
    input += data.size();
    alone += ZSTD_compressCCtx(cctx, out.data(), out.size(), data.data(), data.size(), 3);
    with += cdict ? ZSTD_compress_usingCDict(cctx, out.data(), out.size(), data.data(), data.size(), cdict)
                  : ZSTD_compressCCtx(cctx, out.data(), out.size(), data.data(), data.size(), 3);
  }
  ZSTD_freeCDict(cdict);
  ZSTD_freeCCtx(cctx);
  auto& into = dict.empty() ? none : t;
  into.packages += 1;
  into.files += n;
  into.input += input;
  into.alone += alone;
  into.with += with;
  into.dictionaries += dict.size();
  into.train_ms += best;
  into.slowest_ms = std::max(into.slowest_ms, best);
  if (!dict.empty())
    fmt::print("  {:<28} {:>6} files {:>10} B  alone {:>9}  dict {:>9} + {:>6} = {:5.1f}%  train {:6.1f} ms\n", package,
               n, input, alone, with, dict.size(), 100.0 * double(with + dict.size()) / double(alone), best);
  (void)root;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) roots.emplace_back(argv[i]);
  if (roots.empty()) {
    FILE* p = ::popen("python3 -c 'import site; print(site.getsitepackages()[0])'", "r");
    char line[4096] = {};
    if (p && std::fgets(line, sizeof line, p)) roots.emplace_back(std::string(line, std::strcspn(line, "\n")));
    if (p) ::pclose(p);
  }
  for (const auto& root : roots) {
    diagnostics diag;
    packaging::walk_options options;
    options.read_ignore_files = false;
    auto walked = packaging::walk_tree(root, options, diag);
    if (!walked) {
      fmt::print(stderr, "{}: {}\n", root.string(), diag.message);
      return 1;
    }
    std::map<std::string, std::vector<packaging::file_entry>> packages;
    for (auto& f : walked->files) packages[f.path.substr(0, f.path.find('/'))].push_back(std::move(f));
    fmt::print("{} ({} top-level names)\n", root.string(), packages.size());
    totals t, none;
    for (const auto& [name, files] : packages) measure(root, name, files, t, none);
    fmt::print("with a dictionary: {} packages, {} small files, {} B: zstd -3 alone {} B, with the dictionary {} B + "
               "dictionaries {} B = {:.1f}% ({:+.1f}%); training {:.0f} ms in all, slowest {:.1f} ms\n",
               t.packages, t.files, t.input, t.alone, t.with, t.dictionaries,
               100.0 * double(t.with + t.dictionaries) / double(std::max<std::uint64_t>(t.alone, 1)),
               100.0 * (double(t.with + t.dictionaries) - double(t.alone)) / double(std::max<std::uint64_t>(t.alone, 1)),
               t.train_ms, t.slowest_ms);
    fmt::print("without one (too few small files): {} packages, {} small files, {} B, zstd -3 {} B\n", none.packages,
               none.files, none.input, none.alone);
  }
  return 0;
}
