#pragma once
// The action and message types the node program writes, and ferry and the tests read. One place, so a
// test that counts a name counts one that is really written.
#include <string_view>

namespace ferry::agent::node::action_types {

// The node program's root: continues ferry's ferry:materialise on that node. Its success carries the
// environment (workdir, python_path, layers_cached, layers_fetched, bytes_fetched, layers_evicted).
inline constexpr std::string_view materialise = "ferry:node:materialise";
inline constexpr std::string_view layer = "ferry:materialise:layer";      // {layer, name}: cached=true or fetched
inline constexpr std::string_view lock = "ferry:materialise:lock";        // waiting for another run's lock
inline constexpr std::string_view attempt = "ferry:materialise:attempt";  // {attempt}: one try at a layer
inline constexpr std::string_view shard = "ferry:materialise:shard";      // {shard, bytes}: downloaded, entries
inline constexpr std::string_view cache = "ferry:materialise:cache";      // message {cache_dir}
inline constexpr std::string_view evicted = "ferry:materialise:evicted";  // message {layer, disk_bytes}
// `ferry-node stage`'s root: continues ferry's ferry:stage on that node; its success carries fetched, kept
// and bytes_fetched.
inline constexpr std::string_view stage = "ferry:node:stage";
inline constexpr std::string_view stage_object = "ferry:stage:object";    // {path, bytes}: one object fetched
inline constexpr std::string_view stage_attempt = "ferry:stage:attempt";  // {attempt}: one try at it
// `ferry-node watchdog`: the node's idle watchdog set; its success carries the outcome.
inline constexpr std::string_view watchdog = "ferry:node:watchdog";
inline constexpr std::string_view install = "ferry:node:install";         // the program put in place
inline constexpr std::string_view absent = "ferry:node:absent";  // written by ferry at the level handed to a
                                                                 // node that lacked the program

}  // namespace ferry::agent::node::action_types
