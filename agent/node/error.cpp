#include "agent/node/error.hpp"

namespace ferry::agent::node {
namespace {

class category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "ferry.node"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::bad_plan: return "bad plan";
      case errc::download_failed: return "layer download failed";
      case errc::digest_mismatch: return "downloaded layer does not match its digest";
      case errc::bad_zip: return "layer zip is damaged";
      case errc::hostile_entry: return "layer entry would land outside its layer";
      case errc::over_manifest: return "layer is larger than its manifest says";
      case errc::disk_full: return "not enough disk space for the layer";
      case errc::cache_failed: return "node's layer cache could not be written";
      case errc::lock_timeout: return "layer stayed locked by another run";
      case errc::self_check_failed: return "node program does not match its digest";
      case errc::serve_failed: return "cannot serve shards to peers";
      case errc::not_packed: return "object in storage does not match what this workstation packed";
      case errc::tenant_failed: return "cannot run the tenant as its own user on the node";
    }
    return "unknown node error";
  }
};

}  // namespace

const boost::system::error_category& category() {
  static const category_impl instance;
  return instance;
}

}  // namespace ferry::agent::node
