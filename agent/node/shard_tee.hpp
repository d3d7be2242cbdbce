#pragma once
// A copy of a shard's bytes, kept while it downloads, for the other nodes of the job (fan-out: the node
// program's `serve`, peer_server.hpp, hands them on). The bytes go to `<dir>/<sha256>.part` in shard
// order; the file is renamed to `<dir>/<sha256>` only once the whole shard matched its digest, so a peer
// is never handed bytes that were not checked here. A shard that fails leaves `<dir>/<sha256>.failed`
// instead, so that peers waiting for it turn to storage at once.
//
// Written from the CPU pool, one shard by one thread at a time.
#include "tracing/diagnostics.hpp"

#include <string>
#include <string_view>

namespace ferry::agent::node {

class shard_tee {
 public:
  shard_tee() = default;  // keeps nothing
  // `dir` empty: keeps nothing. A copy that cannot be made is given up quietly: it only spares peers a
  // trip to storage.
  shard_tee(const std::string& dir, std::string_view sha256);
  shard_tee(const shard_tee&) = delete;
  shard_tee& operator=(const shard_tee&) = delete;
  ~shard_tee();

  void append(std::string_view bytes);
  // The shard matched its digest: peers may have it.
  void commit();

 private:
  void give_up();

  int fd_ = -1;
  std::string part_, done_, failed_;
  bool committed_ = false;
};

// This node will not copy the shard (its layer was in the cache already): peers asking for it turn to
// storage at once rather than wait for a copy that never comes. `dir` empty: nothing to say.
void no_copy_of(const std::string& dir, std::string_view sha256);

// This node's materialise is over: a shard with no copy by now will never have one. Written on every way
// out, so a peer's wait (peer_server.hpp) never outlasts the work that could have made the copy.
void copies_over(const std::string& dir);
bool copies_are_over(const std::string& dir);

}  // namespace ferry::agent::node
