// Every S3 response parser on hostile bodies. Storage (or anything between ferry and it) writes these
// bytes; a parser may refuse them but never crash, and what it accepts is checked where a promise exists.
#include "net/s3_xml.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace net = ferry::net;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  ferry::diagnostics diag;

  const auto error = net::find_s3_error(body);
  for (int status : {200, 403, 404, 500, 503}) {
    diag.clear();
    (void)net::s3_failure(status, error, {"PutObject", "bucket", "key", "http://127.0.0.1:1"}, diag);
  }
  if (auto page = net::parse_list_objects_v2(body, diag)) {
    // A key goes back into requests (DeleteObjects): escaped, it must read back as the same key.
    for (const auto& object : page->contents) {
      const std::string doc = "<ListBucketResult><Contents><Key>" + net::xml_escape(object.key) +
                              "</Key><Size>1</Size></Contents></ListBucketResult>";
      auto again = net::parse_list_objects_v2(doc, diag);
      if (!again || again->contents.size() != 1 || again->contents[0].key != object.key) std::abort();
    }
  }
  (void)net::parse_initiate_multipart_upload(body, diag);
  (void)net::parse_complete_multipart_upload(body, diag);
  if (auto uploads = net::parse_list_multipart_uploads(body, diag)) {
    std::vector<std::string> keys;
    for (const auto& upload : uploads->uploads) keys.push_back(upload.key);
    (void)net::build_delete_objects(keys);
  }
  if (auto parts = net::parse_list_parts(body, diag)) {
    (void)parts;
  }
  (void)net::parse_delete_objects(body, diag);
  return 0;
}
