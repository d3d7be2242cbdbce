#pragma once
// The XML of the S3 operations ferry uses, parsed and built without any I/O: error documents and what
// they mean for the person reading them, listings, multipart uploads and batch deletes.
//
// Parsers take the response body and return errc::bad_response, with a diagnostic naming the
// operation, when it is not the document that operation answers with (errc::s3_error when it is an
// <Error>; s3_failure() makes the better message from find_s3_error()). ETags are kept as S3 sends them,
// quotes included, because CompleteMultipartUpload wants them back that way.
#include "tracing/diagnostics.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::net {

// ---------------------------------------------------------------------------------------------
// Errors

// <Error><Code/><Message/><BucketName/><Key/><RequestId/>...</Error>; absent elements stay empty.
struct s3_error_info {
  std::string code;        // "NoSuchKey", "SlowDown", ...
  std::string message;
  std::string bucket;      // <BucketName>, or <Bucket> as some services write it
  std::string key;
  std::string upload_id;   // NoSuchUpload
  std::string access_key_id;  // InvalidAccessKeyId, SignatureDoesNotMatch: the id, never the secret
  std::string endpoint;    // PermanentRedirect and TemporaryRedirect: where the bucket lives
  std::string region;      // AuthorizationHeaderMalformed, IllegalLocationConstraintException
  std::string request_id;
  std::string host_id;
};

// The <Error> document in `body`, or nullopt when the body is empty, is not XML or is another document.
// Besides reading error responses, this catches the <Error> that CompleteMultipartUpload (and CopyObject)
// may send with HTTP 200 after the status line has gone out: check every 200 body of those operations.
std::optional<s3_error_info> find_s3_error(std::string_view body);

// What a failed request was, for the message.
struct s3_request_info {
  std::string_view operation;  // "PutObject", "ListObjectsV2", ...
  std::string_view bucket;
  std::string_view key;        // empty for bucket-level operations
  std::string_view endpoint;   // as the user configured it, e.g. "http://127.0.0.1:5000"
  std::string_view condition;  // a conditional write's header as sent, e.g. "If-None-Match: *"; else empty
};

// The code for a failed S3 request, and in `diag` a message a person can act on: which bucket or key,
// which credential to check. `error` is nullopt when the response had no <Error> body (HEAD requests
// never do); the message then starts "HTTP <status> from <operation>". Messages carry no secrets.
// HTTP 412, and S3's 409 ConditionalRequestConflict, are errc::precondition_failed, named with the
// request's condition.
error_code s3_failure(int http_status, const std::optional<s3_error_info>& error, const s3_request_info& request,
                      diagnostics& diag);

// ---------------------------------------------------------------------------------------------
// ListObjectsV2

struct s3_object {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;
  std::string last_modified;  // ISO 8601 as S3 writes it, e.g. "2009-10-12T17:50:30.000Z"
};

struct list_objects_page {
  std::vector<s3_object> contents;
  std::vector<std::string> common_prefixes;
  bool is_truncated = false;
  std::string next_continuation_token;  // opaque: send it back as continuation-token, URI-encoded
};

// Keys and prefixes come back decoded when the response says <EncodingType>url</EncodingType>.
result<list_objects_page> parse_list_objects_v2(std::string_view body, diagnostics& diag);

// ---------------------------------------------------------------------------------------------
// Multipart uploads

// CreateMultipartUpload (POST ?uploads): the UploadId of the new upload.
result<std::string> parse_initiate_multipart_upload(std::string_view body, diagnostics& diag);

struct completed_part {
  int part_number = 0;  // 1 to 10000, ascending in the request
  std::string etag;     // as UploadPart returned it
};

// The body of CompleteMultipartUpload (POST ?uploadId=...).
std::string build_complete_multipart_upload(std::span<const completed_part> parts);

struct complete_multipart_result {
  std::string location;
  std::string bucket;
  std::string key;
  std::string etag;
  std::optional<s3_error_info> error;  // set when S3 answered 200 with an <Error>: the upload did not complete
};

result<complete_multipart_result> parse_complete_multipart_upload(std::string_view body, diagnostics& diag);

struct multipart_upload {
  std::string key;
  std::string upload_id;
  std::string initiated;  // ISO 8601
};

struct list_multipart_uploads_page {
  std::vector<multipart_upload> uploads;
  std::vector<std::string> common_prefixes;
  bool is_truncated = false;
  std::string next_key_marker;        // send back as key-marker
  std::string next_upload_id_marker;  // send back as upload-id-marker
};

// ListMultipartUploads (GET ?uploads); keys are decoded as for ListObjectsV2.
result<list_multipart_uploads_page> parse_list_multipart_uploads(std::string_view body, diagnostics& diag);

struct uploaded_part {
  int part_number = 0;
  std::string etag;
  std::uint64_t size = 0;
};

struct list_parts_page {
  std::vector<uploaded_part> parts;
  bool is_truncated = false;
  int next_part_number_marker = 0;  // send back as part-number-marker
};

// ListParts (GET ?uploadId=...): what an interrupted upload already holds.
result<list_parts_page> parse_list_parts(std::string_view body, diagnostics& diag);

// ---------------------------------------------------------------------------------------------
// DeleteObjects

// The body of DeleteObjects (POST ?delete), up to 1000 keys. S3 also wants a Content-MD5 (or checksum)
// header over exactly these bytes. Quiet mode reports only the keys that failed.
std::string build_delete_objects(std::span<const std::string> keys, bool quiet = true);

struct delete_failure {
  std::string key;
  std::string code;
  std::string message;
};

struct delete_objects_result {
  std::vector<std::string> deleted;
  std::vector<delete_failure> errors;
};

result<delete_objects_result> parse_delete_objects(std::string_view body, diagnostics& diag);

// ---------------------------------------------------------------------------------------------

// Text escaped for XML character data: & < > " ' as entities, and control characters as character
// references, which (unlike raw ones) survive an XML parser's line-end normalisation.
std::string xml_escape(std::string_view text);

}  // namespace ferry::net
