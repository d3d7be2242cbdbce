// The Python API's frames and its schedule on hostile input: `ferry api` reads frames from the ferry package
// and from every worker on a node, and a worker runs whatever a node's Python says. The input is cut into
// pieces of the sizes its first bytes say; each whole frame that is a task goes into the schedule, and the
// other kinds drive it (take, answer, lose a worker, cancel, a blob stored). The schedule's promises must
// hold throughout: a task is answered at most once, and it is over (answered, failed, cancelled) at most once.
#include "agent/api/api_schedule.hpp"
#include "agent/api/frame.hpp"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

namespace api = ferry::agent::api;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t cut = 1 + data[0] % 64;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  api::frame_reader reader;
  api::api_schedule schedule(data[1] % 4);
  std::set<std::uint64_t> added;
  std::set<std::uint64_t> over;
  for (std::size_t at = 0; at < rest.size(); at += cut) {
    const auto piece = rest.substr(at, cut);
    reader.feed(std::span<const char>(piece.data(), piece.size()));
    while (auto f = reader.next()) {
      check(f->payload.size() <= api::max_payload);
      const auto w = static_cast<std::size_t>(f->id % 3);
      switch (f->kind) {
        case 'T':
          if (auto t = api::task_from(f->id, f->payload); t && added.insert(f->id).second) {
            check(t->payload == f->payload);
            schedule.add(std::move(*t));
          }
          break;
        case 'B': schedule.blob_stored(f->id); break;
        case 'C':
          if (schedule.cancel(f->id)) check(over.insert(f->id).second);
          break;
        case 'G':
          if (const auto* t = schedule.take(w)) check(added.contains(t->id) && !over.contains(t->id));
          break;
        case 'R':
          if (schedule.answered(w, f->id)) check(over.insert(f->id).second);
          break;
        case 'L':
          for (const auto& lost : schedule.worker_lost(w)) check(over.insert(lost.id).second);
          break;
        case 'E': schedule.input_ended(); break;
      }
      check(schedule.live() + over.size() == added.size());
    }
  }
  for (auto id : schedule.fail_all()) check(over.insert(id).second);
  check(over.size() == added.size());
  return 0;
}
