// Quoting an argv into one line for a POSIX shell, checked against /bin/sh and bash themselves.
#include "net/shell_quote.hpp"

#include "support/process.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::net {
namespace {

TEST(shell_quote, quotes_into_single_quotes) {
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(quote_argv({"echo", "a b", "$x"}), "'echo' 'a b' '$x'");
  EXPECT_THROW(shell_quote(std::string("a\0b", 3)), std::invalid_argument);
}

TEST(shell_quote, sh_splits_the_line_back_into_the_same_arguments) {
  std::vector<std::string> args{"printf", "%s\\0"};
  std::string every_byte;
  for (int c = 1; c < 256; ++c) every_byte += static_cast<char>(c);
  const std::vector<std::string> tricky{"a b", "'", "\"", "$(id)", "`id`", "*", "\\", "\n", "", every_byte, "-e"};
  args.insert(args.end(), tricky.begin(), tricky.end());
  for (const auto* shell : {"/bin/sh", "/bin/bash"}) {
    const auto r = test::run({shell, "-c", quote_argv(args)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string expected;
    for (const auto& t : tricky) expected += t + '\0';
    EXPECT_EQ(r.out, expected) << shell;
  }
}

}  // namespace
}  // namespace ferry::net
