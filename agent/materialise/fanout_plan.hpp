#pragma once
// Who fetches from whom when a job's nodes hand its layers on among themselves (fan-out), without any
// I/O. Nodes are placed in the order they arrive: the first `seeds` fetch from storage, and each later
// one from an earlier node, `degree` children to a parent, as a tree (node i's parent is
// (i - seeds) / degree). Storage then serves each shard about `seeds` times whatever the job's size, and
// a shard crosses at most log_degree(nodes / seeds) hops, each streamed as soon as the hop above has it.
//
// A parent serves once its server said where it listens (serving()); until then, and for a child whose
// parent never serves, the child fetches from storage. A parent's server may stop once every child that
// arrived has landed and no other can come to it (children_settled()).
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

class fanout_plan {
 public:
  // `expected`: the nodes the job asked for (children beyond it are not waited for).
  fanout_plan(std::size_t seeds, std::size_t degree, std::size_t expected);

  struct place {
    std::size_t index = 0;
    std::optional<std::string> parent;  // none: a seed, from storage
    bool serves = false;                // it has child slots within `expected`
  };
  // The node's place; a node that arrives again (a second call) keeps its first.
  place arrive(const std::string& node);
  // Its server listens at `url` (http://HOST:PORT).
  void serving(const std::string& node, std::string url);
  // Where `node` fetches from: its parent's server, or empty (storage) while it has none.
  std::string source_of(const std::string& node) const;
  // Its parent, whether it serves or not; none for a seed or a node that has not arrived.
  std::optional<std::string> parent_of(const std::string& node) const;
  // The arrived children of `node`.
  std::vector<std::string> children_of(const std::string& node) const;
  // Its materialise ended, whichever way.
  void landed(const std::string& node);
  // Every child slot of `node` within `expected` arrived, and each such child landed.
  bool children_settled(const std::string& node) const;

  std::size_t arrived() const { return order_.size(); }

 private:
  struct entry {
    std::size_t index = 0;
    std::string url;
    bool landed = false;
  };
  std::size_t first_child(std::size_t parent) const { return seeds_ + parent * degree_; }

  std::size_t seeds_, degree_, expected_;
  std::vector<std::string> order_;  // node ids by arrival
  std::map<std::string, entry> nodes_;
};

}  // namespace ferry::agent
