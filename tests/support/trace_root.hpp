#pragma once
// A trace file for in-process tests: the task's root action is opened on first use, and flush() makes
// everything written so far readable from the file.
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include <boost/json/object.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::test {

class trace_root {
 public:
  trace_root(std::filesystem::path file, std::string action_type)
      : file_(std::move(file)), action_type_(std::move(action_type)) {}

  tracing::action& root();
  // The file's text so far.
  std::string flushed_text();
  // The messages so far of actions of `action_type` (their starts and ends), in file order.
  std::vector<boost::json::object> messages_of(std::string_view action_type);
  // How many of those have `status` ("started", "succeeded", "failed").
  std::size_t count(std::string_view action_type, std::string_view status);
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::string action_type_;
  std::unique_ptr<tracing::sink> out_;  // before the task, which writes to it as it ends
  std::optional<tracing::action> task_;
};

}  // namespace ferry::test
