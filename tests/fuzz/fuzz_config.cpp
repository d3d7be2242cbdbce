// The configuration loader on hostile files: the input is a ferry.toml, and after a NUL byte a value
// given as a flag for the key its first byte picks. Every error is a message naming the place; a value
// that loads must print (`ferry config show`), and a duration or size that parses must print as text
// that parses back to the same value.
#include "config/loader.hpp"
#include "config/schema.hpp"
#include "config/units.hpp"
#include "scratch_dir.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace config = ferry::config;

namespace {

// A directory per fuzzing process: HOME and the XDG dirs point inside it (no user config is read), and
// its ferry.toml is rewritten for each input.
const std::filesystem::path& scratch() {
  static const auto dir = ferry::fuzz::make_scratch_dir("ferry-fuzz-config");
  return dir;
}

void check_units(std::string_view text) {
  if (auto d = config::parse_duration(text)) {
    if (*d > config::max_duration || d->count() < 0) std::abort();
    if (config::parse_duration(config::format_duration(*d)) != d) std::abort();
  }
  if (auto b = config::parse_byte_size(text)) {
    if (b->bytes > config::max_byte_size.bytes) std::abort();
    if (config::parse_byte_size(config::format_byte_size(*b)) != b) std::abort();
  }
  (void)config::quoted_value(text);
  (void)config::closest_keys(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  const auto file = input.substr(0, nul);
  {
    std::ofstream out(scratch() / "ferry.toml", std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }

  config::load_options options;
  options.working_dir = scratch();
  const std::string home = scratch().string();
  options.env = [home](std::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return home;
    return std::nullopt;
  };
  if (nul != std::string_view::npos && nul + 1 < input.size()) {
    const auto keys = config::schema();
    const auto& key = keys[static_cast<unsigned char>(input[nul + 1]) % keys.size()];
    const auto value = input.substr(nul + 2);
    options.flags.push_back({std::string(key.name), std::string(value), "--fuzz"});
    check_units(value);
  }

  ferry::diagnostics diag;
  if (auto loaded = config::load(options, diag)) {
    (void)config::render(*loaded);
  } else if (diag.empty()) {
    std::abort();  // every refusal says what and where
  }
  return 0;
}
