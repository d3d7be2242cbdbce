#include "packaging/layer_upload.hpp"

#include "net/cancellation.hpp"
#include "net/digest.hpp"
#include "net/s3_transfer.hpp"
#include "packaging/zstd_dictionary.hpp"

#include <memory>
#include <optional>

namespace ferry::packaging {
namespace {

// The zip of one shard being made a part at a time. Lives on the heap: the pool thread that fills a part
// and the coroutine that sends it both use it, one after the other.
class part_maker {
 public:
  part_maker(const layer& l, const shard& s, const zip_options& options, std::uint64_t part_size,
             std::atomic<std::uint64_t>* bytes_read)
      : files_(l.files_of(s)),
        part_size_(part_size),
        bytes_read_(bytes_read),
        options_(options) {
    buffer_.reserve(part_size_ + (1 << 20));
  }

  bool done() const { return finished_; }

  // Runs on the pool: compresses until a part's worth of output is ready or the zip is complete.
  result<std::vector<char>> next_part(diagnostics& diag) {
    if (!writer_) {
      if (auto r = start(diag); !r) return r.error();
    }
    while (buffer_.size() < part_size_ && !finished_) {
      if (next_ < files_.size()) {
        const auto before = writer_->bytes_in();
        auto complete = writer_->add_some(files_[next_], part_size_ - buffer_.size(), diag);
        if (!complete) return complete.error();
        if (bytes_read_) *bytes_read_ += writer_->bytes_in() - before;
        if (*complete) ++next_;
      } else {
        if (auto r = writer_->finish(diag); !r) return r.error();
        finished_ = true;
      }
    }
    std::vector<char> part;
    part.reserve(part_size_ + (1 << 20));
    part.swap(buffer_);
    // Hashed here, on the pool and in part order, so the digest costs the I/O thread nothing.
    hash_.update(std::string_view(part.data(), part.size()));
    hashed_bytes_ += part.size();
    if (finished_ && !digest_) digest_ = zip_digest{hash_.finish(), hashed_bytes_};
    return part;
  }

  // Once done(): the SHA-256 and size of every byte the parts held.
  const zip_digest& digest() const { return *digest_; }

 private:
  // The writer, made on the pool with the first part. A zstd shard carries its own dictionary (each shard
  // is fetched and read on its own), trained here from its small files: CPU work before the first byte
  // (a few milliseconds: packaging/zstd_dictionary.hpp; an empty string: too few small files for one).
  result<void> start(diagnostics& diag) {
    options_.dictionary.clear();
    if (options_.codec == zip_codec::zstd) {
      auto trained = train_dictionary(files_, diag);
      if (!trained) return trained.error();
      options_.dictionary = std::move(*trained);
    }
    writer_.emplace(options_, [this](std::string_view bytes) { buffer_.insert(buffer_.end(), bytes.begin(), bytes.end()); });
    return {};
  }

  std::span<const file_entry> files_;
  std::uint64_t part_size_;
  std::atomic<std::uint64_t>* bytes_read_;
  zip_options options_;
  std::vector<char> buffer_;
  std::optional<zip_writer> writer_;
  net::sha256_stream hash_;
  std::uint64_t hashed_bytes_ = 0;
  std::optional<zip_digest> digest_;
  std::size_t next_ = 0;
  bool finished_ = false;
};

std::uint64_t effective_part_size(const net::s3_client& s3) {
  return std::max<std::uint64_t>(5 << 20, s3.settings().part_size.bytes);  // S3's minimum part size
}

// Written only once the zip is whole in storage: a sidecar never vouches for a zip that is not there.
asio::awaitable<result<void>> put_sidecar(tracing::action& parent, net::s3_client& s3, const std::string& bucket,
                                          const std::string& zip_key, const zip_digest& digest, diagnostics& diag) {
  const auto key = sidecar_key(zip_key);
  const auto text = sidecar_text(digest);
  const std::span<const char> body(text.data(), text.size());
  auto put = co_await s3.put_object(parent, bucket, key, body, diag);
  if (!put) co_return put.error();
  co_return result<void>{};
}

}  // namespace

asio::awaitable<result<shard_upload>> upload_shard(tracing::action& parent, net::s3_client& s3, net::cpu_pool& pool,
                                                   const layer& l, const shard& s, const std::string& bucket,
                                                   const std::string& key, const zip_options& options,
                                                   std::atomic<std::uint64_t>* bytes_read, diagnostics& diag) {
  auto maker = std::make_shared<part_maker>(l, s, options, effective_part_size(s3), bytes_read);
  // Lambdas holding shared_ptrs are named, not temporaries in a co_await: GCC 12 destroys those twice.
  auto make_first = [maker, &diag] { return maker->next_part(diag); };
  auto first = co_await net::offload(pool, std::move(make_first));
  if (!first) co_return first.error();
  if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
  if (maker->done()) {
    // The whole zip fits in one part: one PUT, no multipart bookkeeping for the server.
    const std::span<const char> body(first->data(), first->size());
    auto etag = co_await s3.put_object(parent, bucket, key, body, diag);
    if (!etag) co_return etag.error();
    if (auto r = co_await put_sidecar(parent, s3, bucket, key, maker->digest(), diag); !r) co_return r.error();
    co_return shard_upload{first->size(), 0, maker->digest().sha256, std::move(*etag)};
  }
  auto pending = std::make_shared<std::optional<std::vector<char>>>(std::move(*first));
  net::part_source next = [maker, pending, &pool](diagnostics& d)
      -> asio::awaitable<result<std::optional<std::vector<char>>>> {
    if (*pending) {
      auto part = std::move(**pending);
      pending->reset();
      co_return std::optional<std::vector<char>>(std::move(part));
    }
    if (maker->done()) co_return std::optional<std::vector<char>>{};
    auto make_part = [maker, &d] { return maker->next_part(d); };
    auto part = co_await net::offload(pool, std::move(make_part));
    if (!part) co_return part.error();
    if (part->empty()) co_return std::optional<std::vector<char>>{};
    co_return std::optional<std::vector<char>>(std::move(*part));
  };
  auto uploaded = co_await net::upload_multipart(s3, parent, bucket, key, next, diag);
  if (!uploaded) co_return uploaded.error();
  if (auto r = co_await put_sidecar(parent, s3, bucket, key, maker->digest(), diag); !r) co_return r.error();
  co_return shard_upload{uploaded->bytes, uploaded->parts, maker->digest().sha256, std::move(uploaded->etag)};
}

asio::awaitable<result<zip_digest>> zip_shard(net::cpu_pool& pool, const layer& l, const shard& s,
                                              const zip_options& options, std::uint64_t part_size,
                                              std::function<void(std::vector<char>&&)> part_out, diagnostics& diag) {
  auto maker = std::make_shared<part_maker>(l, s, options, part_size, nullptr);
  while (!maker->done()) {
    auto make_part = [maker, &diag] { return maker->next_part(diag); };
    auto part = co_await net::offload(pool, std::move(make_part));
    if (!part) co_return part.error();
    if (co_await net::cancelled()) co_return error_code(asio::error::operation_aborted);
    part_out(std::move(*part));
  }
  co_return maker->digest();
}

}  // namespace ferry::packaging
