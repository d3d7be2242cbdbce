#pragma once
// The multipart upload protocol, sans-io: from what the operations report, which operations to start
// next. The async shell (upload_multipart in s3_transfer.hpp) only carries them out and reports back; the
// two speak as every sans-io core does (net/sans_io.hpp), next() being a set of actions run in parallel.
//
//   create ---------------------------------------------- failed: finish (nothing to abort)
//     |
//   read part 1, send it, read part 2 while it goes ... at most `parts_in_flight` parts being sent and
//     |  one more read ahead; every part read is sent or released
//     |  source ended and every part sent: complete, parts in ascending order
//     |  a failure or a cancellation: start nothing new, wait for what runs, then abort
//     v
//   complete ---- done: finish with the ETag
//     |  failed or cancelled
//     v
//   abort (once; even after a cancellation, because parts left behind cost money) ---- finish
//
// The first failure is the result, with its diagnostics: what fails after it only fails because of it.
// A terminal cancellation means "stop cleaning up": no abort starts after one, and one that runs hears it.
#include "net/cancellation.hpp"
#include "net/sans_io.hpp"
#include "net/s3_xml.hpp"
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ferry::net {

// Cancellation (net/cancellation.hpp's cancel_kind): partial and total stop the upload alike; terminal also
// stops its clean-up.

// Which cancellations the shell passes on to an operation while it runs.
enum class cancelled_by {
  nothing,   // create: storage may make the upload whatever the caller does, and its id must come back
  terminal,  // abort: it runs because of a cancellation, so only the last word stops it
  any,       // reading, sending and completing
};

struct multipart_action {
  enum class kind {
    create,        // CreateMultipartUpload
    read_part,     // take part `part`'s bytes from the source (or learn that it ended)
    send_part,     // UploadPart for part `part`, whose bytes the shell holds from read_part
    release_part,  // part `part` will never be sent: its bytes may go
    complete,      // CompleteMultipartUpload with `parts`
    abort,         // AbortMultipartUpload
    finish,        // nothing runs any more: the outcome is failure() or the totals
  };
  kind what = kind::finish;
  int part = 0;                        // read_part, send_part, release_part
  std::vector<completed_part> parts;   // complete: ascending by part number
  cancelled_by stops = cancelled_by::any;
};

class multipart_upload_core {
 public:
  // `parts_in_flight` below 1 counts as 1.
  explicit multipart_upload_core(int parts_in_flight);

  // What to start now, in order, to run in parallel; each action is returned once. The first call asks
  // for the create.
  std::vector<multipart_action> next();

  // Events: the outcome of each action started, and cancellations as the shell hears them.
  void created(std::string upload_id);
  void create_failed(const error_code& ec, diagnostics diag);
  void part_read(int number, std::uint64_t size);
  void source_ended();
  void source_failed(const error_code& ec, diagnostics diag);
  void part_sent(int number, std::string etag);
  void part_failed(int number, const error_code& ec, diagnostics diag);
  void cancelled(cancel_kind kind);
  void completed(std::string etag);
  void complete_failed(const error_code& ec, diagnostics diag);
  void aborted();
  void abort_failed(const error_code& ec, diagnostics diag);

  const std::string& upload_id() const { return upload_id_; }
  bool done() const { return phase_ == phase::finished; }  // finish was handed out
  // Once finished: the first failure (empty when the upload completed) and its diagnostics.
  const error_code& failure() const { return error_; }
  const diagnostics& failure_diagnostics() const { return diag_; }
  // Once finished with success: the object's ETag, and the bytes and parts that made it.
  const std::string& etag() const { return etag_; }
  std::uint64_t bytes() const { return bytes_; }
  int parts() const { return static_cast<int>(done_.size()); }

  // The error a cancellation ends the upload with: asio::error::operation_aborted, spelled without Asio.
  static error_code cancellation_error();

 private:
  // open: the upload exists and is neither completing nor aborting; parts go, or after a failure the
  // shell drains what runs. ended: the outcome is known and only the finish action is left to hand out.
  enum class phase { start, creating, open, completing, aborting, ended, finished };
  struct held_part {
    int number = 0;
    std::uint64_t size = 0;
  };

  void fail(const error_code& ec, diagnostics diag);
  void plan_parts(std::vector<multipart_action>& out);
  void wind_down(std::vector<multipart_action>& out);
  bool part_work_running() const { return reading_ || !sending_.empty(); }

  int limit_;
  phase phase_ = phase::start;
  std::string upload_id_;
  int next_number_ = 1;                     // the part the next read_part asks for
  bool reading_ = false;                    // a read_part runs
  bool source_ended_ = false;
  std::optional<held_part> ready_;          // read, waiting for a free sending slot
  std::map<int, std::uint64_t> sending_;    // part number -> size, being sent
  std::vector<int> to_release_;             // read after the upload stopped
  std::vector<completed_part> done_;
  std::uint64_t bytes_ = 0;
  bool terminal_ = false;
  error_code error_;
  diagnostics diag_;
  std::string etag_;
};

static_assert(sans_io::core<multipart_upload_core>);

}  // namespace ferry::net
