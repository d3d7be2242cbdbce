#include "support/trace_root.hpp"

#include "support/temp_dir.hpp"

#include <stdexcept>

namespace ferry::test {

tracing::action& trace_root::root() {
  if (!out_) {
    diagnostics diag;
    auto opened = tracing::sink::open(file_, diag);
    if (!opened) throw std::runtime_error(diag.message);
    out_ = std::move(*opened);
    task_.emplace(tracing::action::start_task(*out_, action_type_));
  }
  return *task_;
}

std::string trace_root::flushed_text() {
  if (out_) out_->flush();
  return read_file(file_);
}

}  // namespace ferry::test
