#include "support/trace_root.hpp"

#include "support/temp_dir.hpp"

#include <boost/json/parse.hpp>

#include <sstream>
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

std::vector<boost::json::object> trace_root::messages_of(std::string_view action_type) {
  std::vector<boost::json::object> out;
  std::istringstream in(flushed_text());
  for (std::string line; std::getline(in, line);) {
    auto message = boost::json::parse(line).as_object();
    const auto* type = message.if_contains("action_type");
    if (type && type->is_string() && type->as_string() == action_type) out.push_back(std::move(message));
  }
  return out;
}

std::size_t trace_root::count(std::string_view action_type, std::string_view status) {
  std::size_t n = 0;
  for (const auto& m : messages_of(action_type)) {
    const auto* s = m.if_contains("action_status");
    n += s && s->is_string() && s->as_string() == status;
  }
  return n;
}

}  // namespace ferry::test
