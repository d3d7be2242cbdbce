#include "net/s3_xml.hpp"

#include "net/error.hpp"
#include "net/uri_encode.hpp"

#include <fmt/format.h>
#include <pugixml.hpp>

#include <algorithm>
#include <charconv>

namespace ferry::net {
namespace {

constexpr std::string_view s3_namespace = "http://s3.amazonaws.com/doc/2006-03-01/";

// A key made only of spaces is still a key: keep whitespace-only text when it is an element's only child.
constexpr unsigned parse_options = pugi::parse_default | pugi::parse_ws_pcdata_single;

std::string text(pugi::xml_node parent, const char* name) { return parent.child(name).child_value(); }

// The text of the first of `names` that `parent` has.
std::string text_of_any(pugi::xml_node parent, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const auto child = parent.child(name)) return child.child_value();
  }
  return {};
}

s3_error_info read_error(pugi::xml_node error) {
  s3_error_info info;
  info.code = text(error, "Code");
  info.message = text(error, "Message");
  info.bucket = text_of_any(error, {"BucketName", "Bucket"});
  info.key = text(error, "Key");
  info.upload_id = text(error, "UploadId");
  info.access_key_id = text(error, "AWSAccessKeyId");
  info.endpoint = text(error, "Endpoint");
  info.region = text_of_any(error, {"Region", "ExpectedRegion"});
  info.request_id = text(error, "RequestId");
  info.host_id = text(error, "HostId");
  return info;
}

// Parses `body` into `doc` and returns its root, which must be `root`; anything else is a bad_response
// whose diagnostic names the operation.
result<pugi::xml_node> load(pugi::xml_document& doc, std::string_view body, std::string_view operation,
                            std::string_view root, diagnostics& diag, std::string_view alias = {}) {
  const auto parsed = doc.load_buffer(body.data(), body.size(), parse_options, pugi::encoding_utf8);
  if (!parsed) {
    diag.set(fmt::format("{} response is not valid XML: {} at byte {} of {}", operation, parsed.description(),
                         parsed.offset, body.size()));
    return make_error_code(errc::bad_response);
  }
  const auto element = doc.document_element();
  if (element.name() == root || (!alias.empty() && element.name() == alias)) return element;
  if (element.name() == std::string_view("Error")) {
    const auto error = read_error(element);
    diag.set(fmt::format("{} answered with an S3 error: {}: {}", operation, error.code, error.message));
    return make_error_code(errc::s3_error);
  }
  diag.set(fmt::format("{} response is a <{}> document, not <{}>", operation, element.name(), root));
  return make_error_code(errc::bad_response);
}

template <class Number>
bool parse_number(std::string_view digits, Number& out) {
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, out);
  return ec == std::errc() && ptr == end && !digits.empty();
}

// A numeric child element, which must be present and well-formed.
template <class Number>
result<Number> number(pugi::xml_node parent, const char* name, std::string_view operation, diagnostics& diag) {
  const std::string value = text(parent, name);
  Number out{};
  if (parse_number(value, out)) return out;
  diag.set(fmt::format("{} response has a <{}> that is not a number: '{}'", operation, name, value));
  return make_error_code(errc::bad_response);
}

bool flag(pugi::xml_node parent, const char* name) { return text(parent, name) == "true"; }

// Keys come back form-encoded when the request asked for encoding-type=url: '+' is a space (as
// botocore's unquote_plus reads it) and a real '+' arrives as %2B. A %00 would decode to a key that no
// request can name (XML cannot carry a NUL, even as &#0;, and a C string ends there, so a DeleteObjects
// could reach a shorter key): the page is refused instead, see refuse_nul().
class key_decoder {
 public:
  explicit key_decoder(pugi::xml_node root) : url_(text(root, "EncodingType") == "url") {}

  std::string operator()(std::string value) const {
    if (!url_) return value;
    std::replace(value.begin(), value.end(), '+', ' ');
    auto decoded = uri_decode(value);
    if (decoded.find('\0') != std::string::npos) saw_nul_ = true;
    return decoded;
  }

  error_code refuse_nul(std::string_view operation, diagnostics& diag) const {
    if (!saw_nul_) return {};
    diag.set(fmt::format("{} response holds a key with a NUL byte (%00), which no request can name", operation));
    return make_error_code(errc::bad_response);
  }

 private:
  bool url_;
  mutable bool saw_nul_ = false;
};

std::vector<std::string> common_prefixes(pugi::xml_node root, const key_decoder& decode) {
  std::vector<std::string> out;
  for (const auto entry : root.children("CommonPrefixes")) out.push_back(decode(text(entry, "Prefix")));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Messages for failures

// "s3://bucket/key", or "s3://bucket" for bucket-level operations.
std::string s3_url(const s3_request_info& request) {
  if (request.key.empty()) return fmt::format("s3://{}", request.bucket);
  return fmt::format("s3://{}/{}", request.bucket, request.key);
}

bool is_throttling(int status, std::string_view code) {
  return code == "SlowDown" || code == "Throttling" || code == "ThrottlingException" ||
         code == "RequestLimitExceeded" || code == "TooManyRequests" || status == 429 || status == 503;
}

bool is_server_failure(int status, std::string_view code) {
  return code == "InternalError" || code == "ServiceUnavailable" || status >= 500;
}

bool is_failed_precondition(int status, std::string_view code) {
  return status == 412 || code == "PreconditionFailed" || code == "ConditionalRequestConflict";
}

// A conditional write that did not happen: which condition, and what that means for the object.
error_code precondition_failure(int status, std::string_view code, const s3_request_info& request,
                                diagnostics& diag) {
  const std::string_view condition = request.condition;
  const std::string_view why = code == "ConditionalRequestConflict" ? "another write to the key was under way"
                               : condition.starts_with("If-None-Match") ? "an object with that key exists"
                               : condition.starts_with("If-Match")      ? "the object is no longer that version"
                                                                        : "";
  diag.set(fmt::format("{} on {} did not happen: {} does not hold{}{}{} ({}HTTP {}) (endpoint {})",
                       request.operation, s3_url(request),
                       condition.empty() ? std::string("its precondition") : fmt::format("its condition {}", condition),
                       why.empty() ? "" : " (", why, why.empty() ? "" : ")",
                       code.empty() ? std::string() : fmt::format("{}, ", code), status, request.endpoint));
  return make_error_code(errc::precondition_failed);
}

// A failure that came with no <Error> document: all we have is the status.
error_code status_failure(int status, const s3_request_info& request, diagnostics& diag) {
  const auto head = fmt::format("HTTP {} from {}", status, request.operation);
  if (status == 404 && !request.key.empty()) {
    diag.set(fmt::format("{}: object '{}' not found in bucket '{}' (endpoint {})", head, request.key,
                         request.bucket, request.endpoint));
    return make_error_code(errc::no_such_key);
  }
  if (status == 404) {
    diag.set(fmt::format("{}: bucket '{}' not found (endpoint {})", head, request.bucket, request.endpoint));
    return make_error_code(errc::no_such_bucket);
  }
  if (status == 403) {
    diag.set(fmt::format("{}: access to {} denied; check the credentials, their permissions and this machine's "
                         "clock (endpoint {})",
                         head, s3_url(request), request.endpoint));
    return make_error_code(errc::access_denied);
  }
  if (is_throttling(status, {})) {
    diag.set(fmt::format("{}: the service is throttling requests (endpoint {})", head, request.endpoint));
    return make_error_code(errc::throttled);
  }
  diag.set(fmt::format("{} on {} (endpoint {})", head, s3_url(request), request.endpoint));
  return make_error_code(is_server_failure(status, {}) ? errc::server_error : errc::http_status);
}

// A failure with an <Error> document: the code says what to tell the person.
error_code coded_failure(int status, const s3_error_info& error, const s3_request_info& request,
                         diagnostics& diag) {
  const std::string_view code = error.code;
  const std::string_view bucket = request.bucket.empty() ? std::string_view(error.bucket) : request.bucket;
  const std::string_view key = request.key.empty() ? std::string_view(error.key) : request.key;
  const auto at = fmt::format("endpoint {}", request.endpoint);
  if (code == "NoSuchBucket") {
    diag.set(fmt::format("bucket '{}' does not exist ({})", bucket, at));
    return make_error_code(errc::no_such_bucket);
  }
  if (code == "NoSuchKey") {
    diag.set(fmt::format("object '{}' does not exist in bucket '{}' ({})", key, bucket, at));
    return make_error_code(errc::no_such_key);
  }
  if (code == "NoSuchUpload") {
    diag.set(fmt::format("multipart upload {} of '{}' in bucket '{}' no longer exists: it was completed or "
                         "aborted ({})",
                         error.upload_id.empty() ? "(unnamed)" : error.upload_id, key, bucket, at));
    return make_error_code(errc::no_such_upload);
  }
  if (code == "SignatureDoesNotMatch") {
    diag.set(fmt::format("{} on {}: the request signature does not match (SignatureDoesNotMatch): check the "
                         "secret access key (AWS_SECRET_ACCESS_KEY or the profile's aws_secret_access_key) and "
                         "that this machine's clock is right ({})",
                         request.operation, s3_url(request), at));
    return make_error_code(errc::access_denied);
  }
  if (code == "InvalidAccessKeyId") {
    const auto id = error.access_key_id.empty() ? std::string() : fmt::format(" '{}'", error.access_key_id);
    diag.set(fmt::format("{} on {}: the access key id{} is unknown to the service (InvalidAccessKeyId): check "
                         "AWS_ACCESS_KEY_ID or the profile's aws_access_key_id ({})",
                         request.operation, s3_url(request), id, at));
    return make_error_code(errc::access_denied);
  }
  if (code == "RequestTimeTooSkewed") {
    diag.set(fmt::format("{} on {}: this machine's clock differs too much from the service's "
                         "(RequestTimeTooSkewed): set the clock right ({})",
                         request.operation, s3_url(request), at));
    return make_error_code(errc::access_denied);
  }
  if (code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired") {
    diag.set(fmt::format("{} on {}: the session token is expired or invalid ({}): refresh the credentials "
                         "(AWS_SESSION_TOKEN or the profile) ({})",
                         request.operation, s3_url(request), code, at));
    return make_error_code(errc::access_denied);
  }
  if (code == "AccessDenied" || code == "AllAccessDisabled" || status == 403) {
    // AWS's own message may name the missing permission; moto's and older ones just say "Access Denied".
    const bool generic = error.message.empty() || error.message == "Access Denied";
    diag.set(fmt::format("{} on {} was denied ({}){}{} ({})", request.operation, s3_url(request), code,
                         generic ? "" : ": ", generic ? "" : error.message, at));
    return make_error_code(errc::access_denied);
  }
  if (code == "PermanentRedirect" || code == "TemporaryRedirect" || code == "AuthorizationHeaderMalformed" ||
      code == "IllegalLocationConstraintException") {
    const auto where = !error.endpoint.empty() ? fmt::format(" through endpoint {}", error.endpoint)
                       : !error.region.empty() ? fmt::format(" in region {} (set AWS_REGION)", error.region)
                                               : std::string();
    diag.set(fmt::format("bucket '{}' must be reached{} ({}: {}) ({})", bucket, where, code, error.message, at));
    return make_error_code(errc::s3_error);
  }
  const auto request_id = error.request_id.empty() ? std::string() : fmt::format(", request id {}", error.request_id);
  if (is_throttling(status, code)) {
    diag.set(fmt::format("{} on {}: the service is throttling requests ({}, HTTP {}{}) ({})", request.operation,
                         s3_url(request), code, status, request_id, at));
    return make_error_code(errc::throttled);
  }
  diag.set(fmt::format("{} on {} failed: {}: {} (HTTP {}{}) ({})", request.operation, s3_url(request), code,
                       error.message, status, request_id, at));
  return make_error_code(is_server_failure(status, code) ? errc::server_error : errc::s3_error);
}

void append_element(std::string& out, std::string_view name, std::string_view value) {
  fmt::format_to(std::back_inserter(out), "<{0}>{1}</{0}>", name, xml_escape(value));
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::optional<s3_error_info> find_s3_error(std::string_view body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size(), parse_options, pugi::encoding_utf8)) return std::nullopt;
  const auto root = doc.document_element();
  if (root.name() != std::string_view("Error")) return std::nullopt;
  return read_error(root);
}

error_code s3_failure(int http_status, const std::optional<s3_error_info>& error, const s3_request_info& request,
                      diagnostics& diag) {
  const std::string_view code = error ? std::string_view(error->code) : std::string_view();
  // First: a 412 to a HEAD has no <Error> body, and a 409 ConditionalRequestConflict is no ordinary error.
  if (is_failed_precondition(http_status, code)) return precondition_failure(http_status, code, request, diag);
  if (!error || error->code.empty()) return status_failure(http_status, request, diag);
  return coded_failure(http_status, *error, request, diag);
}

result<list_objects_page> parse_list_objects_v2(std::string_view body, diagnostics& diag) {
  constexpr std::string_view operation = "ListObjectsV2";
  pugi::xml_document doc;
  const auto root = load(doc, body, operation, "ListBucketResult", diag);
  if (!root) return root.error();
  const key_decoder decode(*root);
  list_objects_page page;
  for (const auto entry : root->children("Contents")) {
    const auto size = number<std::uint64_t>(entry, "Size", operation, diag);
    if (!size) return size.error();
    page.contents.push_back({decode(text(entry, "Key")), *size, text(entry, "ETag"), text(entry, "LastModified")});
  }
  page.common_prefixes = common_prefixes(*root, decode);
  if (auto ec = decode.refuse_nul(operation, diag)) return ec;
  page.is_truncated = flag(*root, "IsTruncated");
  page.next_continuation_token = text(*root, "NextContinuationToken");
  if (page.is_truncated && page.next_continuation_token.empty()) {
    diag.set("ListObjectsV2 response is truncated but has no <NextContinuationToken>");
    return make_error_code(errc::bad_response);
  }
  return page;
}

result<std::string> parse_initiate_multipart_upload(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "CreateMultipartUpload", "InitiateMultipartUploadResult", diag);
  if (!root) return root.error();
  auto upload_id = text(*root, "UploadId");
  if (upload_id.empty()) {
    diag.set("CreateMultipartUpload response has no <UploadId>");
    return make_error_code(errc::bad_response);
  }
  return upload_id;
}

std::string build_complete_multipart_upload(std::span<const completed_part> parts) {
  std::string out = fmt::format(R"(<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="{}">)",
                                s3_namespace);
  for (const auto& part : parts) {
    out += "<Part>";
    append_element(out, "PartNumber", std::to_string(part.part_number));
    append_element(out, "ETag", part.etag);
    out += "</Part>";
  }
  out += "</CompleteMultipartUpload>";
  return out;
}

result<complete_multipart_result> parse_complete_multipart_upload(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto parsed = doc.load_buffer(body.data(), body.size(), parse_options, pugi::encoding_utf8);
  // The 200-with-<Error> case is a result here, not a parse failure: the caller decides what it means.
  if (parsed && doc.document_element().name() == std::string_view("Error")) {
    complete_multipart_result out;
    out.error = read_error(doc.document_element());
    return out;
  }
  // moto names the root <CompleteMultipartUploadResponse>; AWS documents <CompleteMultipartUploadResult>.
  const auto root = load(doc, body, "CompleteMultipartUpload", "CompleteMultipartUploadResult", diag,
                         "CompleteMultipartUploadResponse");
  if (!root) return root.error();
  complete_multipart_result out{text(*root, "Location"), text(*root, "Bucket"), text(*root, "Key"),
                                text(*root, "ETag"), std::nullopt};
  if (out.etag.empty()) {
    diag.set("CompleteMultipartUpload response has no <ETag>");
    return make_error_code(errc::bad_response);
  }
  return out;
}

result<list_multipart_uploads_page> parse_list_multipart_uploads(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "ListMultipartUploads", "ListMultipartUploadsResult", diag);
  if (!root) return root.error();
  const key_decoder decode(*root);
  list_multipart_uploads_page page;
  for (const auto upload : root->children("Upload")) {
    page.uploads.push_back({decode(text(upload, "Key")), text(upload, "UploadId"), text(upload, "Initiated")});
  }
  page.common_prefixes = common_prefixes(*root, decode);
  page.is_truncated = flag(*root, "IsTruncated");
  page.next_key_marker = decode(text(*root, "NextKeyMarker"));
  if (auto ec = decode.refuse_nul("ListMultipartUploads", diag)) return ec;
  page.next_upload_id_marker = text(*root, "NextUploadIdMarker");
  return page;
}

result<list_parts_page> parse_list_parts(std::string_view body, diagnostics& diag) {
  constexpr std::string_view operation = "ListParts";
  pugi::xml_document doc;
  // moto names the root <ListPartsResponse>; AWS documents <ListPartsResult>.
  const auto root = load(doc, body, operation, "ListPartsResult", diag, "ListPartsResponse");
  if (!root) return root.error();
  list_parts_page page;
  for (const auto part : root->children("Part")) {
    const auto number_of_part = number<int>(part, "PartNumber", operation, diag);
    if (!number_of_part) return number_of_part.error();
    const auto size = number<std::uint64_t>(part, "Size", operation, diag);
    if (!size) return size.error();
    page.parts.push_back({*number_of_part, text(part, "ETag"), *size});
  }
  page.is_truncated = flag(*root, "IsTruncated");
  if (page.is_truncated) {
    const auto marker = number<int>(*root, "NextPartNumberMarker", operation, diag);
    if (!marker) return marker.error();
    page.next_part_number_marker = *marker;
  }
  return page;
}

std::string build_delete_objects(std::span<const std::string> keys, bool quiet) {
  std::string out = fmt::format(R"(<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="{}">)", s3_namespace);
  if (quiet) out += "<Quiet>true</Quiet>";
  for (const auto& key : keys) {
    out += "<Object>";
    append_element(out, "Key", key);
    out += "</Object>";
  }
  out += "</Delete>";
  return out;
}

result<delete_objects_result> parse_delete_objects(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "DeleteObjects", "DeleteResult", diag);
  if (!root) return root.error();
  delete_objects_result out;
  for (const auto deleted : root->children("Deleted")) out.deleted.push_back(text(deleted, "Key"));
  for (const auto error : root->children("Error")) {
    out.errors.push_back({text(error, "Key"), text(error, "Code"), text(error, "Message")});
  }
  return out;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "&#x{:X};", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace ferry::net
