#pragma once
// The top-level names a Python source file imports (`import a.b as c, d` gives a and d; `from e.f import g`
// gives e; relative imports give nothing), read line by line without parsing Python. A docstring that reads
// like an import statement counts too: the names serve to tell which shipped packages the workspace may
// use, and a name too many only makes that guess more generous.
#include <string>
#include <string_view>
#include <vector>

namespace ferry::packaging {

// Sorted, unique.
std::vector<std::string> imported_names(std::string_view source);

}  // namespace ferry::packaging
