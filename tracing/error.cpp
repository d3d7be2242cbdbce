#include "tracing/error.hpp"

namespace ferry::tracing {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.tracing"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::bad_task_id: return "malformed task id";
      case errc::unreadable_file: return "trace file cannot be read";
      case errc::malformed_line: return "malformed trace line";
      case errc::cannot_write: return "trace file cannot be written";
      case errc::no_trace: return "no trace to read";
    }
    return "unknown tracing error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::tracing
