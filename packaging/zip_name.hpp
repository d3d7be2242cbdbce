#pragma once
// How a zip entry's name is flagged. Names are raw path bytes; a reader decodes a name as UTF-8 only when
// its header's bit 11 says so, and as CP437 otherwise. The bit is set exactly for names that are not ASCII
// and are strict UTF-8, whatever the locale, so the same files always give the same zip bytes.
#include <string_view>

namespace ferry::packaging {

bool is_ascii(std::string_view s);
// Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF (what readers will decode).
bool is_utf8(std::string_view s);
// General-purpose bit 11 (the name is UTF-8) for this name.
inline bool wants_utf8_flag(std::string_view name) { return !is_ascii(name) && is_utf8(name); }

}  // namespace ferry::packaging
