#pragma once
// A trace file for in-process tests: the task's root action is opened on first use, and flush() makes
// everything written so far readable from the file.
#include "tracing/action.hpp"
#include "tracing/sink.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace ferry::test {

class trace_root {
 public:
  trace_root(std::filesystem::path file, std::string action_type)
      : file_(std::move(file)), action_type_(std::move(action_type)) {}

  tracing::action& root();
  // The file's text so far.
  std::string flushed_text();
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::string action_type_;
  std::unique_ptr<tracing::sink> out_;  // before the task, which writes to it as it ends
  std::optional<tracing::action> task_;
};

}  // namespace ferry::test
