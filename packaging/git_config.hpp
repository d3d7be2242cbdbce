#pragma once
// Just enough of git-config(1)'s file syntax to find core.excludesFile the way git does, without git: a
// workstation that packs need not have git installed. Sans-io: the caller reads the files and follows
// include.path entries.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

struct config_entry {
  // "section.key" or "section.subsection.key": section and key lowercased (git compares them without
  // case), the subsection as written ("[remote \"Origin\"]"), or lowercased in the old "[section.sub]" form.
  std::string name;
  std::optional<std::string> value;  // nullopt for a bare "key" line (boolean true)
};

// The entries of one config file, in file order. Lines git would reject (a bad section header, an unknown
// escape) end the parse: git refuses the whole file, so what came before is at best a guess.
std::vector<config_entry> parse_git_config(std::string_view text);

// git's interpolate_path for pathname values: "~/x" is under `home`, "~user/x" under that user's home.
// nullopt when the home is unknown (git then treats the variable as unset).
std::optional<std::string> expand_config_path(std::string_view value, std::string_view home);

}  // namespace ferry::packaging
