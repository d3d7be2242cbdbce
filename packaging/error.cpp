#include "packaging/error.hpp"

namespace ferry::packaging {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.packaging"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::unreadable_file: return "file cannot be read";
      case errc::bad_pattern: return "exclude pattern is invalid";
      case errc::not_a_directory: return "not a directory";
      case errc::external_symlink: return "symlink points outside the packaged tree";
      case errc::layer_too_large: return "layer exceeds the maximum size";
      case errc::file_changed: return "file changed while it was being packed";
      case errc::symlink_loop: return "symlink loop";
      case errc::python_failed: return "python interpreter failed";
      case errc::bad_probe_output: return "python interpreter gave an unexpected answer";
      case errc::probe_timeout: return "python interpreter did not answer in time";
      case errc::bad_cache: return "hash cache is damaged";
      case errc::bad_manifest: return "manifest is malformed or lacks shard digests";
    }
    return "unknown packaging error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::packaging
