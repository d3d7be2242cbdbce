#include "config/error.hpp"

namespace ferry::config {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.config"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::unreadable_file: return "configuration file cannot be read";
      case errc::malformed: return "configuration file is not valid TOML";
      case errc::unknown_key: return "unknown configuration key";
      case errc::wrong_type: return "configuration value has the wrong type";
      case errc::bad_value: return "configuration value is invalid";
      case errc::too_large: return "configuration file is too large";
    }
    return "unknown configuration error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::config
