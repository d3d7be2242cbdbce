#pragma once
// The packing half of every command that ships the project (`ferry pack`, `run`, `map`, `warmup`):
// ask the interpreter for its sys.path, turn the shipped entries into layers, and put what storage lacks
// there. The command decides how to show progress and results; this file only does the work, so that a
// run packs exactly as `ferry pack` does.
#include "agent/cli/command_context.hpp"
#include "net/s3_session.hpp"
#include "packaging/discovery.hpp"
#include "packaging/discovery_cache.hpp"
#include "packaging/pack.hpp"
#include "packaging/site_plan.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ferry::agent {

struct pack_request {
  bool dry_run = false;  // check storage, upload nothing
  bool force = false;    // pack layers over packaging.max_layer_size
  bool need_storage = true;  // fail without storage.url (false: pack without it, nothing is uploaded)
  // Called once the scan is done, before the progress's on_scanned, with what is known by then: the
  // discovery, the roots and the site plan (how the node's Python is to see the environment), in terms of
  // the scan's layers.
  std::function<void(const struct pack_outcome&, const packaging::scan_result&)> on_site;
};

struct pack_outcome {
  packaging::discovery found;
  std::vector<packaging::root_spec> roots;
  packaging::pack_settings settings;
  packaging::pack_report report;
  packaging::site_plan site;
  std::vector<std::string> warnings;  // what cannot ship, and the scan's own warnings
  std::size_t layers_present = 0;     // already in storage before this pack
};

packaging::discover_options discover_options_for(const command_context& ctx);
packaging::pack_settings pack_settings_for(const command_context& ctx, const pack_request& request);
// The shipped sys.path entries as roots to pack, in order; what cannot ship is said, never dropped quietly.
std::vector<packaging::root_spec> roots_of(const packaging::discovery& found, std::vector<std::string>& warnings);

// Storage for packing (and presigning), or none when storage.url is unset. A malformed storage.url (a
// configuration error: config::errc) or missing credentials fail here, before any work.
result<std::optional<net::s3_session>> open_storage(const command_context& ctx, diagnostics& diag);

// How every command shows that storage has stopped answering: a warning line on stderr.
net::stall_watch::notice stall_notice();

// Discovers, scans and ships. `session` is from open_storage (none: nothing is checked or uploaded).
boost::asio::awaitable<result<pack_outcome>> run_pack(tracing::action& act, const command_context& ctx,
                                                      net::s3_session* session, const pack_request& request,
                                                      packaging::pack_progress* progress, diagnostics& diag);

}  // namespace ferry::agent
