#include "support/eliot.hpp"

#include "support/process.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

namespace ferry::test {

std::string peer_script(const std::string& name) { return std::string(FERRY_SOURCE_DIR) + "/tests/peers/" + name; }

boost::json::array eliot_parse(const std::vector<std::filesystem::path>& files) {
  std::vector<std::string> argv{system_python, peer_script("eliot_check.py")};
  for (const auto& f : files) argv.push_back(f.string());
  const auto r = run(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  return boost::json::parse(r.out).as_array();
}

std::vector<std::string> flatten(const boost::json::value& node, int depth) {
  std::vector<std::string> out;
  const auto& o = node.as_object();
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  if (o.contains("message_type")) {
    out.push_back(indent + "msg " + std::string(o.at("message_type").as_string()));
    return out;
  }
  out.push_back(indent + std::string(o.at("action_type").as_string()) + ":" + std::string(o.at("status").as_string()));
  for (const auto& child : o.at("children").as_array()) {
    auto sub = flatten(child, depth + 1);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

}  // namespace ferry::test
