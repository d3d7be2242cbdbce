#pragma once
// The human text that travels beside an error_code. Codes say what class of failure happened (and drive
// retries and exit codes); diagnostics say which bucket, file or line, for the person reading the error.
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <string>
#include <utility>

namespace ferry {

namespace sys = boost::system;
using sys::error_code;
template <class T>
using result = sys::result<T, error_code>;

struct diagnostics {
  std::string message;

  void set(std::string text) { message = std::move(text); }
  void clear() { message.clear(); }
  bool empty() const { return message.empty(); }
};

// "what failed: why" from a code and the diagnostics that came with it.
inline std::string describe(const error_code& ec, const diagnostics& diag) {
  if (diag.empty()) return ec.message();
  return diag.message;
}

}  // namespace ferry
