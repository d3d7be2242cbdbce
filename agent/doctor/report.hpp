#pragma once
// `ferry doctor`'s report, in the order of its checks whatever order they finished in: as text, a line
// per check marked ✓, ✗ or — (skipped) with each failure's fix beneath it and a summary last; or as one
// JSON document {ok, checks: [{name, status, ok, detail, fix}]} for scripts.
#include "agent/doctor/check.hpp"

#include <string>
#include <vector>

namespace ferry::agent::doctor {

std::string render_text(const std::vector<check_result>& checks);
std::string render_json(const std::vector<check_result>& checks);

// Every check passed: a skipped one does not count as passing.
bool all_passed(const std::vector<check_result>& checks);

}  // namespace ferry::agent::doctor
