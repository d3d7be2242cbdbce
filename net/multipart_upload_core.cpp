#include "net/multipart_upload_core.hpp"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <utility>

namespace ferry::net {
namespace {

multipart_action action(multipart_action::kind what, int part = 0) {
  multipart_action a;
  a.what = what;
  a.part = part;
  return a;
}

}  // namespace

error_code multipart_upload_core::cancellation_error() {
  // Asio's operation_aborted is ECANCELED in the system category on POSIX; tests hold the two equal.
  return {ECANCELED, boost::system::system_category()};
}

multipart_upload_core::multipart_upload_core(int parts_in_flight) : limit_(std::max(1, parts_in_flight)) {}

std::vector<multipart_action> multipart_upload_core::next() {
  std::vector<multipart_action> out;
  for (const int number : to_release_) out.push_back(action(multipart_action::kind::release_part, number));
  to_release_.clear();
  if (phase_ == phase::start) {
    if (error_) {
      phase_ = phase::ended;  // cancelled before anything began: nothing to create, nothing to abort
    } else {
      phase_ = phase::creating;
      auto create = action(multipart_action::kind::create);
      create.stops = cancelled_by::nothing;
      out.push_back(std::move(create));
    }
  }
  if (phase_ == phase::open) plan_parts(out);
  if (phase_ == phase::ended) {
    phase_ = phase::finished;
    out.push_back(action(multipart_action::kind::finish));
  }
  return out;
}

void multipart_upload_core::plan_parts(std::vector<multipart_action>& out) {
  if (error_) return wind_down(out);
  // Sending first: a read starts only once the part before it has a slot, which bounds the memory held
  // to the parts being sent plus one.
  if (ready_ && sending_.size() < static_cast<std::size_t>(limit_)) {
    out.push_back(action(multipart_action::kind::send_part, ready_->number));
    sending_.emplace(ready_->number, ready_->size);
    ready_.reset();
  }
  if (!reading_ && !ready_ && !source_ended_) {
    out.push_back(action(multipart_action::kind::read_part, next_number_++));
    reading_ = true;
  }
  if (source_ended_ && !reading_ && !ready_ && sending_.empty()) {
    phase_ = phase::completing;
    auto complete = action(multipart_action::kind::complete);
    complete.parts = done_;
    // Parts finish in any order; S3 wants them ascending.
    std::sort(complete.parts.begin(), complete.parts.end(),
              [](const completed_part& a, const completed_part& b) { return a.part_number < b.part_number; });
    out.push_back(std::move(complete));
  }
}

// After a failure or a cancellation: nothing new starts, and the abort waits for the reads and sends
// that run, because a part that lands after the abort would stay behind.
void multipart_upload_core::wind_down(std::vector<multipart_action>& out) {
  if (ready_) {
    out.push_back(action(multipart_action::kind::release_part, ready_->number));
    ready_.reset();
  }
  if (part_work_running()) return;
  if (terminal_) {
    phase_ = phase::ended;
    return;
  }
  phase_ = phase::aborting;
  auto abort = action(multipart_action::kind::abort);
  abort.stops = cancelled_by::terminal;
  out.push_back(std::move(abort));
}

void multipart_upload_core::fail(const error_code& ec, diagnostics diag) {
  if (error_) return;
  error_ = ec;
  diag_ = std::move(diag);
}

void multipart_upload_core::created(std::string upload_id) {
  assert(phase_ == phase::creating);
  upload_id_ = std::move(upload_id);
  phase_ = phase::open;
}

void multipart_upload_core::create_failed(const error_code& ec, diagnostics diag) {
  assert(phase_ == phase::creating);
  fail(ec, std::move(diag));
  phase_ = phase::ended;
}

void multipart_upload_core::part_read(int number, std::uint64_t size) {
  assert(reading_ && number == next_number_ - 1);
  reading_ = false;
  if (error_) {
    to_release_.push_back(number);
    return;
  }
  ready_ = held_part{number, size};
}

void multipart_upload_core::source_ended() {
  assert(reading_);
  reading_ = false;
  source_ended_ = true;
}

void multipart_upload_core::source_failed(const error_code& ec, diagnostics diag) {
  assert(reading_);
  reading_ = false;
  fail(ec, std::move(diag));
}

void multipart_upload_core::part_sent(int number, std::string etag) {
  const auto it = sending_.find(number);
  assert(it != sending_.end());
  bytes_ += it->second;
  sending_.erase(it);
  done_.push_back({number, std::move(etag)});
}

void multipart_upload_core::part_failed(int number, const error_code& ec, diagnostics diag) {
  assert(sending_.contains(number));
  sending_.erase(number);
  fail(ec, std::move(diag));
}

void multipart_upload_core::cancelled(cancel_kind kind) {
  // Once the outcome is known there is nothing left to stop.
  if (phase_ == phase::ended || phase_ == phase::finished) return;
  if (kind == cancel_kind::terminal) terminal_ = true;
  fail(cancellation_error(), {});
}

void multipart_upload_core::completed(std::string etag) {
  assert(phase_ == phase::completing);
  // Only a cancellation can have come while the request ran, and it did not stop it: the object exists.
  error_ = {};
  diag_.clear();
  etag_ = std::move(etag);
  phase_ = phase::ended;
}

void multipart_upload_core::complete_failed(const error_code& ec, diagnostics diag) {
  assert(phase_ == phase::completing);
  fail(ec, std::move(diag));
  phase_ = phase::open;  // nothing runs: the next actions abort (or, after a terminal cancellation, finish)
}

void multipart_upload_core::aborted() {
  assert(phase_ == phase::aborting);
  phase_ = phase::ended;
}

// The abort's own failure is not the upload's: the failure that made it abort stays the result.
void multipart_upload_core::abort_failed(const error_code&, diagnostics) {
  assert(phase_ == phase::aborting);
  phase_ = phase::ended;
}

}  // namespace ferry::net
