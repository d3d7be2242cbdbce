#include "net/ini_file.hpp"

#include "net/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ferry::net {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool is_comment(std::string_view trimmed) { return trimmed.front() == '#' || trimmed.front() == ';'; }

class parser {
 public:
  parser(std::string_view source, diagnostics& diag) : source_(source), diag_(diag) {}

  // Returns false after reporting the line's problem.
  bool line(std::string_view raw, std::size_t number) {
    number_ = number;
    const auto text = trim(raw);
    if (text.empty()) {
      key_.clear();  // a blank line ends any nested block or continued value
      return true;
    }
    if (is_comment(text)) return true;
    const auto indent = raw.find_first_not_of(" \t");
    // Deeper than its key: a nested setting or a continued value. Keys indented alike are siblings.
    if (!key_.empty() && indent > key_indent_) return nested(text);
    if (text.front() == '[') return header(text);
    return entry(text, indent);
  }

  ini_document take() { return std::move(doc_); }

 private:
  bool header(std::string_view text) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return fail("'[' without a closing ']'");
    const auto rest = trim(text.substr(close + 1));
    if (!rest.empty() && !is_comment(rest)) return fail("text after the section's ']'");
    const auto name = trim(text.substr(1, close - 1));
    if (name.empty()) return fail("empty section name");
    section_ = &doc_.sections[std::string(name)];
    key_.clear();
    return true;
  }

  bool entry(std::string_view text, std::size_t indent) {
    if (!section_) return fail("a setting before any [section]");
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) return fail("expected 'key = value' or '[section]'");
    const auto name = trim(text.substr(0, eq));
    if (name.empty()) return fail("a setting with no name before '='");
    key_ = lowercase(name);
    key_indent_ = indent;
    value_ = &((*section_)[key_] = std::string(trim(text.substr(eq + 1))));
    nested_ = value_->empty();
    return true;
  }

  bool nested(std::string_view text) {
    if (!nested_) {
      value_->push_back('\n');
      value_->append(text);
      return true;
    }
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("expected 'key = value' under '{}'", key_));
    const auto name = trim(text.substr(0, eq));
    if (name.empty()) return fail("a setting with no name before '='");
    (*section_)[key_ + "." + lowercase(name)] = std::string(trim(text.substr(eq + 1)));
    return true;
  }

  bool fail(std::string_view problem) {
    diag_.set(fmt::format("{}:{}: {}", source_, number_, problem));
    return false;
  }

  std::string_view source_;
  diagnostics& diag_;
  ini_document doc_;
  ini_section* section_ = nullptr;
  std::string key_;  // the last key in this block, for indented lines that follow it
  std::size_t key_indent_ = 0;
  std::string* value_ = nullptr;
  bool nested_ = false;
  std::size_t number_ = 0;
};

}  // namespace

const ini_section* ini_document::find(std::string_view section) const {
  const auto it = sections.find(section);
  return it == sections.end() ? nullptr : &it->second;
}

std::optional<std::string_view> ini_document::get(std::string_view section, std::string_view key) const {
  const auto* s = find(section);
  if (!s) return std::nullopt;
  const auto it = s->find(key);
  if (it == s->end()) return std::nullopt;
  return std::string_view(it->second);
}

result<ini_document> parse_ini(std::string_view text, std::string_view source, diagnostics& diag) {
  parser p(source, diag);
  std::size_t number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!p.line(raw, ++number)) return make_error_code(errc::bad_credentials_file);
  }
  return p.take();
}

result<ini_document> load_ini_file(const std::filesystem::path& path, diagnostics& diag) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ini_document{};
  const auto unreadable = [&](const char* why) {
    diag.set(fmt::format("{}: cannot read: {}", path.string(), why));
    return make_error_code(errc::unreadable_file);
  };
  if (std::filesystem::is_directory(path, ec)) return unreadable("is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return unreadable(std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) return unreadable(std::strerror(errno));
  return parse_ini(text, path.string(), diag);
}

}  // namespace ferry::net
