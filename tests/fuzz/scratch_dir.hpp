#pragma once
// A directory of a fuzzing process's own, for targets whose interface is a path: made once, under the
// temporary directory, and reused for every input (libFuzzer runs millions).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace ferry::fuzz {

inline std::filesystem::path make_scratch_dir(const char* name) {
  std::string dir = (std::filesystem::temp_directory_path() / (std::string(name) + "-XXXXXX")).string();
  if (!mkdtemp(dir.data())) std::abort();
  return dir;
}

}  // namespace ferry::fuzz
