#pragma once
// Debian's python3-eliot as the oracle for traces: its parser must rebuild complete trees from them.
#include <boost/json/value.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ferry::test {

// The tasks eliot.parse.Parser rebuilds from these files (see tests/peers/eliot_check.py for the shape).
boost::json::array eliot_parse(const std::vector<std::filesystem::path>& files);

// The path of a helper script in tests/peers/.
std::string peer_script(const std::string& name);

// Depth-first list of "action_type:status" (and "message_type") under a parsed node, for assertions.
std::vector<std::string> flatten(const boost::json::value& node, int depth = 0);

}  // namespace ferry::test
