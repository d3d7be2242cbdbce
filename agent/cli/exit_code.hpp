#pragma once
// The process exit codes ferry promises.
namespace ferry::agent::exit_code {

inline constexpr int success = 0;
inline constexpr int failure = 1;
inline constexpr int usage = 2;  // bad command line or configuration
inline constexpr int interrupted = 130;

}  // namespace ferry::agent::exit_code
