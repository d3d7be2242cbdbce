#pragma once
// Failures of the tracing module itself: reading task ids and trace files.
#include <boost/system/error_code.hpp>

#include <type_traits>

namespace ferry::tracing {

enum class errc {
  bad_task_id = 1,   // FERRY_TASK_ID or a parsed id is not "<uuid>@/<n>/..."
  unreadable_file,   // a trace file could not be opened or read
  malformed_line,    // a trace line is not a JSON object with eliot's fields
  cannot_write,      // the trace file could not be created or written
  no_trace,          // no command's trace in the trace directory
};

const boost::system::error_category& category();

inline boost::system::error_code make_error_code(errc e) { return {static_cast<int>(e), category()}; }

}  // namespace ferry::tracing

template <>
struct boost::system::is_error_code_enum<ferry::tracing::errc> : std::true_type {};
