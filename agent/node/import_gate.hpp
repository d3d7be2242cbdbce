#pragma once
// What the import hook of a lazily started command is told (import_hook/sitecustomize.py), without any
// I/O: the plan's catalogue (every layer, the top-level names and distributions it holds), which layers
// are in place and which failed, the answers to the hook's requests, and the order the command imported
// layers in. import_server.hpp carries the requests to it over a Unix socket; materialise_layers.hpp tells
// it what lands.
//
// The hook's requests, one line each:
//   hello PID              -> every layer: {index, id, name, dir, modules, dists, state, reason}
//   want module NAME       -> once every layer holding NAME is in place or failed: every layer's state
//   want dist NAME|*       -> the same for a distribution (importlib.metadata), * for all of them
//   want layer INDEX       -> the same for one layer (what an editable install imports from)
//   imported NAME...       -> "ok": the top-level names one process imported, in order
#include "agent/node/plan.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::agent::node {

class import_gate {
 public:
  enum class state { pending, ready, failed };

  // The catalogue arrived; `dir_of(id)` is where a layer lands.
  void open(const plan_catalogue& catalogue, const std::function<std::string(const std::string&)>& dir_of);
  bool opened() const { return opened_; }

  // A layer (every place of it) is in place, or failed for good with `reason`.
  void landed(const std::string& id);
  void failed(const std::string& id, const std::string& reason);
  // Nothing more lands: every pending layer fails with `reason`.
  void stop(const std::string& reason);

  bool all_landed() const;
  std::size_t count() const { return layers_.size(); }
  std::size_t pending() const;
  std::optional<std::size_t> workspace() const { return workspace_; }
  const std::string& dir(std::size_t index) const { return layers_[index].dir; }
  state state_of(std::size_t index) const { return layers_[index].st; }
  // Moves on at every change: a waiter wakes and asks again.
  std::uint64_t generation() const { return generation_; }

  // The layers a request waits for: those holding the module, or the distribution ("*": every layer).
  std::vector<std::size_t> holders(std::string_view kind, std::string_view name) const;
  bool settled(const std::vector<std::size_t>& indexes) const;
  std::vector<std::string> ids(const std::vector<std::size_t>& indexes) const;
  std::string names(const std::vector<std::size_t>& indexes) const;  // "numpy, scipy"

  std::string hello_reply() const;   // one JSON line, newline included
  std::string states_reply() const;  // one JSON line, newline included

  // One process's imports: the layers of those names join the order where they first appear.
  void imported(const std::vector<std::string>& modules);
  // Layer names in the order the command first imported them.
  const std::vector<std::string>& imported_layers() const { return imported_; }

 private:
  struct layer {
    catalogue_entry entry;
    std::string dir;
    state st = state::pending;
    std::string reason;
  };

  std::vector<layer> layers_;
  std::map<std::string, std::vector<std::size_t>, std::less<>> modules_, dists_;
  std::optional<std::size_t> workspace_;
  std::vector<std::string> imported_;
  bool opened_ = false;
  std::uint64_t generation_ = 0;
};

}  // namespace ferry::agent::node
