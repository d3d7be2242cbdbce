// S3's XML: the response shapes AWS documents, keys with characters XML and URLs treat specially,
// malformed input, the messages people read when a request fails, and real responses from moto_server.
#include "net/s3_xml.hpp"

#include "net/error.hpp"
#include "net/uri_encode.hpp"
#include "support/moto.hpp"
#include "support/process.hpp"

#include <gtest/gtest.h>
#include <pugixml.hpp>

#include <algorithm>
#include <memory>

namespace ferry::net {
namespace {

const s3_request_info put_request{"PutObject", "ferry-bucket", "layers/abc", "http://127.0.0.1:5000"};

std::string failure_message(int status, const std::optional<s3_error_info>& error, const s3_request_info& request,
                            errc expected) {
  diagnostics diag;
  const auto ec = s3_failure(status, error, request, diag);
  EXPECT_EQ(ec, expected) << diag.message;
  return diag.message;
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The keys of a document our builders wrote, as any XML parser reads them back.
std::vector<std::string> keys_in(const std::string& xml, const char* path) {
  pugi::xml_document doc;
  EXPECT_TRUE(doc.load_string(xml.c_str(), pugi::parse_default | pugi::parse_ws_pcdata_single)) << xml;
  std::vector<std::string> out;
  for (const auto& node : doc.select_nodes(path)) out.emplace_back(node.node().child_value());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Error documents

TEST(s3_xml_error, reads_the_documented_error_shape) {
  const auto error = find_s3_error(R"(<?xml version="1.0" encoding="UTF-8"?>
<Error>
  <Code>NoSuchKey</Code>
  <Message>The resource you requested does not exist</Message>
  <Resource>/mybucket/myfoto.jpg</Resource>
  <Key>myfoto.jpg</Key>
  <BucketName>mybucket</BucketName>
  <RequestId>4442587FB7D0A2F9</RequestId>
  <HostId>host/id==</HostId>
</Error>)");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "NoSuchKey");
  EXPECT_EQ(error->message, "The resource you requested does not exist");
  EXPECT_EQ(error->key, "myfoto.jpg");
  EXPECT_EQ(error->bucket, "mybucket");
  EXPECT_EQ(error->request_id, "4442587FB7D0A2F9");
  EXPECT_EQ(error->host_id, "host/id==");
}

TEST(s3_xml_error, bucket_element_may_be_named_bucket) {
  const auto error = find_s3_error("<Error><Code>NoSuchBucket</Code><Bucket>b1</Bucket></Error>");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->bucket, "b1");
}

TEST(s3_xml_error, other_documents_empty_bodies_and_garbage_are_not_errors) {
  EXPECT_FALSE(find_s3_error(""));
  EXPECT_FALSE(find_s3_error("<html><body>502 Bad Gateway</body></html>"));
  EXPECT_FALSE(find_s3_error("<Error><Code>Trunc"));
  EXPECT_FALSE(find_s3_error("<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>"));
}

// ---------------------------------------------------------------------------------------------
// Messages for failures

TEST(s3_xml_failure, no_such_bucket_names_the_bucket_and_endpoint) {
  const auto message = failure_message(404, s3_error_info{.code = "NoSuchBucket", .bucket = "ferry-bucket"},
                                       put_request, errc::no_such_bucket);
  EXPECT_EQ(message, "bucket 'ferry-bucket' does not exist (endpoint http://127.0.0.1:5000)");
}

TEST(s3_xml_failure, no_such_key_names_the_key) {
  const auto message =
      failure_message(404, s3_error_info{.code = "NoSuchKey"}, put_request, errc::no_such_key);
  EXPECT_TRUE(contains(message, "'layers/abc'")) << message;
  EXPECT_TRUE(contains(message, "'ferry-bucket'")) << message;
}

TEST(s3_xml_failure, signature_mismatch_points_at_the_secret_and_the_clock) {
  s3_error_info error{.code = "SignatureDoesNotMatch",
                      .message = "The request signature we calculated does not match the signature you provided.",
                      .access_key_id = "AKIDEXAMPLE"};
  const auto message = failure_message(403, error, put_request, errc::access_denied);
  EXPECT_TRUE(contains(message, "AWS_SECRET_ACCESS_KEY")) << message;
  EXPECT_TRUE(contains(message, "clock")) << message;
  EXPECT_TRUE(contains(message, "PutObject")) << message;
}

TEST(s3_xml_failure, unknown_access_key_id_says_so) {
  const auto message = failure_message(
      403, s3_error_info{.code = "InvalidAccessKeyId", .access_key_id = "AKIDUNKNOWN"}, put_request,
      errc::access_denied);
  EXPECT_TRUE(contains(message, "access key id 'AKIDUNKNOWN' is unknown")) << message;
  EXPECT_TRUE(contains(message, "AWS_ACCESS_KEY_ID")) << message;
}

TEST(s3_xml_failure, access_denied_names_the_key_and_operation) {
  auto message =
      failure_message(403, s3_error_info{.code = "AccessDenied", .message = "Access Denied"}, put_request,
                      errc::access_denied);
  EXPECT_TRUE(contains(message, "PutObject on s3://ferry-bucket/layers/abc was denied")) << message;
  message = failure_message(403,
                            s3_error_info{.code = "AccessDenied",
                                          .message = "User: arn:aws:iam::1:user/u is not authorized to perform: "
                                                     "s3:PutObject"},
                            put_request, errc::access_denied);
  EXPECT_TRUE(contains(message, "not authorized to perform: s3:PutObject")) << message;
}

TEST(s3_xml_failure, slow_down_and_bare_503_are_throttling) {
  auto message = failure_message(503, s3_error_info{.code = "SlowDown", .message = "Please reduce your request rate."},
                                 put_request, errc::throttled);
  EXPECT_TRUE(contains(message, "throttling")) << message;
  message = failure_message(503, std::nullopt, put_request, errc::throttled);
  EXPECT_TRUE(contains(message, "HTTP 503 from PutObject")) << message;
}

TEST(s3_xml_failure, internal_errors_are_server_errors_even_with_status_200) {
  const auto message =
      failure_message(200, s3_error_info{.code = "InternalError", .message = "Please try again.", .request_id = "R1"},
                      put_request, errc::server_error);
  EXPECT_TRUE(contains(message, "InternalError")) << message;
  EXPECT_TRUE(contains(message, "request id R1")) << message;
}

TEST(s3_xml_failure, a_failed_condition_names_the_condition_and_what_it_means) {
  s3_request_info create_only = put_request;
  create_only.condition = "If-None-Match: *";
  auto message = failure_message(
      412, s3_error_info{.code = "PreconditionFailed", .message = "At least one of the pre-conditions you specified did not hold"},
      create_only, errc::precondition_failed);
  EXPECT_EQ(message, "PutObject on s3://ferry-bucket/layers/abc did not happen: its condition If-None-Match: * does "
                     "not hold (an object with that key exists) (PreconditionFailed, HTTP 412) (endpoint "
                     "http://127.0.0.1:5000)");
  s3_request_info if_match = put_request;
  if_match.condition = R"(If-Match: "abc")";
  message = failure_message(412, std::nullopt, if_match, errc::precondition_failed);
  EXPECT_TRUE(contains(message, R"(its condition If-Match: "abc" does not hold (the object is no longer that version))"))
      << message;
  // S3's answer to a conditional write that raced another one: a conflict, not a failure of the service.
  message = failure_message(409, s3_error_info{.code = "ConditionalRequestConflict"}, if_match,
                            errc::precondition_failed);
  EXPECT_TRUE(contains(message, "another write to the key was under way")) << message;
  // Other 409s stay what they were.
  failure_message(409, s3_error_info{.code = "OperationAborted"}, put_request, errc::s3_error);
}

TEST(s3_xml_failure, no_body_gives_the_status_and_operation) {
  EXPECT_EQ(failure_message(400, std::nullopt, put_request, errc::http_status),
            "HTTP 400 from PutObject on s3://ferry-bucket/layers/abc (endpoint http://127.0.0.1:5000)");
  const s3_request_info head{"HeadObject", "b", "k", "http://e"};
  auto message = failure_message(404, std::nullopt, head, errc::no_such_key);
  EXPECT_EQ(message.rfind("HTTP 404 from HeadObject", 0), 0u) << message;
  message = failure_message(404, std::nullopt, {"HeadBucket", "b", "", "http://e"}, errc::no_such_bucket);
  EXPECT_TRUE(contains(message, "bucket 'b'")) << message;
  message = failure_message(403, std::nullopt, head, errc::access_denied);
  EXPECT_EQ(message.rfind("HTTP 403 from HeadObject", 0), 0u) << message;
}

TEST(s3_xml_failure, unknown_codes_keep_code_and_message) {
  const auto message = failure_message(
      400, s3_error_info{.code = "EntityTooSmall", .message = "Your proposed upload is smaller than the minimum"},
      put_request, errc::s3_error);
  EXPECT_TRUE(contains(message, "EntityTooSmall: Your proposed upload")) << message;
  EXPECT_TRUE(contains(message, "HTTP 400")) << message;
}

TEST(s3_xml_failure, messages_carry_no_signature_material) {
  // S3's SignatureDoesNotMatch document echoes what was signed; none of it belongs in a message.
  const auto error = find_s3_error(R"(<Error><Code>SignatureDoesNotMatch</Code>
<Message>The request signature we calculated does not match the signature you provided.</Message>
<AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId>
<StringToSign>AWS4-HMAC-SHA256 20240101T000000Z</StringToSign>
<SignatureProvided>deadbeefcafef00d</SignatureProvided>
<CanonicalRequest>PUT /b/k</CanonicalRequest></Error>)");
  ASSERT_TRUE(error);
  const auto message = failure_message(403, error, put_request, errc::access_denied);
  EXPECT_FALSE(contains(message, "deadbeefcafef00d")) << message;
  EXPECT_FALSE(contains(message, "AWS4-HMAC-SHA256")) << message;
}

// ---------------------------------------------------------------------------------------------
// ListObjectsV2

TEST(s3_xml_list, reads_the_documented_listing) {
  diagnostics diag;
  const auto page = parse_list_objects_v2(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
    <Name>bucket</Name>
    <Prefix/>
    <KeyCount>2</KeyCount>
    <MaxKeys>1000</MaxKeys>
    <IsTruncated>false</IsTruncated>
    <Contents>
        <Key>my-image.jpg</Key>
        <LastModified>2009-10-12T17:50:30.000Z</LastModified>
        <ETag>"fba9dede5f27731c9771645a39863328"</ETag>
        <Size>434234</Size>
        <StorageClass>STANDARD</StorageClass>
    </Contents>
    <Contents>
        <Key>my-third-image.jpg</Key>
        <LastModified>2009-10-12T17:50:30.000Z</LastModified>
        <ETag>&quot;1b2cf535f27731c974343645a3985328&quot;</ETag>
        <Size>64994</Size>
        <StorageClass>STANDARD_IA</StorageClass>
    </Contents>
    <CommonPrefixes><Prefix>photos/</Prefix></CommonPrefixes>
</ListBucketResult>)",
                                          diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->contents.size(), 2u);
  EXPECT_EQ(page->contents[0].key, "my-image.jpg");
  EXPECT_EQ(page->contents[0].size, 434234u);
  EXPECT_EQ(page->contents[0].etag, "\"fba9dede5f27731c9771645a39863328\"");
  EXPECT_EQ(page->contents[0].last_modified, "2009-10-12T17:50:30.000Z");
  EXPECT_EQ(page->contents[1].etag, "\"1b2cf535f27731c974343645a3985328\"");
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"photos/"});
  EXPECT_FALSE(page->is_truncated);
  EXPECT_TRUE(page->next_continuation_token.empty());
}

TEST(s3_xml_list, truncated_listing_carries_its_token) {
  diagnostics diag;
  const auto page = parse_list_objects_v2(R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix></Prefix>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <KeyCount>1</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>true</IsTruncated>
  <Contents><Key>happyface.jpg</Key><Size>11</Size><ETag>"e"</ETag></Contents>
</ListBucketResult>)",
                                          diag);
  ASSERT_TRUE(page) << diag.message;
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");

  const auto broken = parse_list_objects_v2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", diag);
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error(), errc::bad_response);
  EXPECT_TRUE(contains(diag.message, "NextContinuationToken")) << diag.message;
}

TEST(s3_xml_list, escaped_and_whitespace_keys_come_back_exactly) {
  diagnostics diag;
  const auto page = parse_list_objects_v2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos; \xC3\xA9\xE2\x82\xAC</Key><Size>1</Size></Contents>"
      "<Contents><Key> </Key><Size>2</Size></Contents>"
      "<Contents><Key>  padded  </Key><Size>3</Size></Contents>"
      "<Contents><Key>line&#13;&#10;end</Key><Size>4</Size></Contents>"
      "<Contents><Key><![CDATA[cdata<key>]]></Key><Size>5</Size></Contents>"
      "</ListBucketResult>",
      diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->contents.size(), 5u);
  EXPECT_EQ(page->contents[0].key, "a&b <c> \"d\" 'e' \xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(page->contents[1].key, " ");
  EXPECT_EQ(page->contents[2].key, "  padded  ");
  EXPECT_EQ(page->contents[3].key, "line\r\nend");
  EXPECT_EQ(page->contents[4].key, "cdata<key>");
}

TEST(s3_xml_list, url_encoded_keys_are_decoded_when_the_response_says_so) {
  diagnostics diag;
  const auto page = parse_list_objects_v2(
      "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
      "<Contents><Key>dir/a+b%2Bc%26d%C3%A9%25</Key><Size>1</Size></Contents>"
      "<Contents><Key>a%20b</Key><Size>1</Size></Contents>"
      "<CommonPrefixes><Prefix>sp+ace%2F</Prefix></CommonPrefixes>"
      "</ListBucketResult>",
      diag);
  ASSERT_TRUE(page) << diag.message;
  EXPECT_EQ(page->contents[0].key, "dir/a b+c&d\xC3\xA9%");
  EXPECT_EQ(page->contents[1].key, "a b");
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"sp ace/"});

  // Without <EncodingType> the same text is the key itself.
  const auto plain = parse_list_objects_v2(
      "<ListBucketResult><Contents><Key>a+b%2B</Key><Size>1</Size></Contents></ListBucketResult>", diag);
  ASSERT_TRUE(plain) << diag.message;
  EXPECT_EQ(plain->contents[0].key, "a+b%2B");
}

// XML cannot carry a NUL (not even as &#0;), so a key that decodes to one could never be named in a
// DeleteObjects body: cut at the NUL, the request would reach a shorter key. The page is refused.
TEST(s3_xml_list, a_url_encoded_key_holding_a_nul_refuses_the_page) {
  diagnostics diag;
  const auto page = parse_list_objects_v2(
      "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
      "<Contents><Key>keep</Key><Size>1</Size></Contents>"
      "<Contents><Key>keep%00.tmp</Key><Size>1</Size></Contents></ListBucketResult>",
      diag);
  ASSERT_FALSE(page);
  EXPECT_EQ(page.error(), errc::bad_response);
  EXPECT_TRUE(contains(diag.message, "ListObjectsV2") && contains(diag.message, "NUL")) << diag.message;

  diag.clear();
  const auto prefix = parse_list_objects_v2(
      "<ListBucketResult><EncodingType>url</EncodingType><CommonPrefixes><Prefix>a%00/</Prefix></CommonPrefixes>"
      "</ListBucketResult>",
      diag);
  EXPECT_FALSE(prefix);

  diag.clear();
  const auto uploads = parse_list_multipart_uploads(
      "<ListMultipartUploadsResult><EncodingType>url</EncodingType>"
      "<Upload><Key>layers/x%00</Key><UploadId>u1</UploadId></Upload></ListMultipartUploadsResult>",
      diag);
  ASSERT_FALSE(uploads);
  EXPECT_TRUE(contains(diag.message, "ListMultipartUploads")) << diag.message;
}

TEST(s3_xml_list, malformed_input_names_the_operation) {
  diagnostics diag;
  for (const std::string_view body :
       {std::string_view(""), std::string_view("<ListBucketResult><Contents><Key>a</Key>"),
        std::string_view("not xml at all"), std::string_view("<ListBucketResult><Key>a</Kye></ListBucketResult>")}) {
    diag.clear();
    const auto page = parse_list_objects_v2(body, diag);
    ASSERT_FALSE(page) << body;
    EXPECT_EQ(page.error(), errc::bad_response) << body;
    EXPECT_EQ(diag.message.rfind("ListObjectsV2 response is not valid XML", 0), 0u) << diag.message;
  }
  const auto wrong_root = parse_list_objects_v2("<ListAllMyBucketsResult/>", diag);
  ASSERT_FALSE(wrong_root);
  EXPECT_EQ(wrong_root.error(), errc::bad_response);
  EXPECT_TRUE(contains(diag.message, "<ListAllMyBucketsResult>")) << diag.message;

  const auto bad_size = parse_list_objects_v2(
      "<ListBucketResult><Contents><Key>a</Key><Size>12x</Size></Contents></ListBucketResult>", diag);
  ASSERT_FALSE(bad_size);
  EXPECT_EQ(bad_size.error(), errc::bad_response);
  EXPECT_TRUE(contains(diag.message, "<Size>")) << diag.message;

  const auto error = parse_list_objects_v2("<Error><Code>AccessDenied</Code><Message>no</Message></Error>", diag);
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error(), errc::s3_error);
  EXPECT_TRUE(contains(diag.message, "AccessDenied")) << diag.message;
}

// ---------------------------------------------------------------------------------------------
// Multipart uploads

TEST(s3_xml_multipart, initiate_gives_the_upload_id) {
  diagnostics diag;
  const auto id = parse_initiate_multipart_upload(R"(<?xml version="1.0" encoding="UTF-8"?>
<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>example-bucket</Bucket>
  <Key>example-object</Key>
  <UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>
</InitiateMultipartUploadResult>)",
                                                  diag);
  ASSERT_TRUE(id) << diag.message;
  EXPECT_EQ(*id, "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA");
  const auto missing = parse_initiate_multipart_upload("<InitiateMultipartUploadResult/>", diag);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), errc::bad_response);
}

TEST(s3_xml_multipart, complete_request_lists_parts_in_order_with_escaped_etags) {
  const std::vector<completed_part> parts{{1, "\"a54357aff0632cce46d942af68356b38\""}, {2, "\"0c78aef8<&>\""}};
  const auto xml = build_complete_multipart_upload(parts);
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUpload", 0), 0u) << xml;
  EXPECT_EQ(keys_in(xml, "/CompleteMultipartUpload/Part/PartNumber"), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(keys_in(xml, "/CompleteMultipartUpload/Part/ETag"),
            (std::vector<std::string>{"\"a54357aff0632cce46d942af68356b38\"", "\"0c78aef8<&>\""}));
}

TEST(s3_xml_multipart, complete_result_or_the_error_hidden_in_a_200) {
  diagnostics diag;
  auto done = parse_complete_multipart_upload(R"(<?xml version="1.0" encoding="UTF-8"?>
<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
 <Location>http://Example-Bucket.s3.amazonaws.com/Example-Object</Location>
 <Bucket>Example-Bucket</Bucket>
 <Key>Example-Object</Key>
 <ETag>"3858f62230ac3c915f300c664312c11f-9"</ETag>
</CompleteMultipartUploadResult>)",
                                              diag);
  ASSERT_TRUE(done) << diag.message;
  EXPECT_FALSE(done->error);
  EXPECT_EQ(done->etag, "\"3858f62230ac3c915f300c664312c11f-9\"");
  EXPECT_EQ(done->key, "Example-Object");
  EXPECT_EQ(done->location, "http://Example-Bucket.s3.amazonaws.com/Example-Object");

  // AWS documents this body with status 200: the upload failed after the response had begun.
  const std::string failed = R"(<?xml version="1.0" encoding="UTF-8"?>

<Error>
<Code>InternalError</Code>
<Message>We encountered an internal error. Please try again.</Message>
<RequestId>656c76696e6727732072657175657374</RequestId>
<HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId>
</Error>)";
  done = parse_complete_multipart_upload(failed, diag);
  ASSERT_TRUE(done) << diag.message;
  ASSERT_TRUE(done->error);
  EXPECT_EQ(done->error->code, "InternalError");
  EXPECT_TRUE(find_s3_error(failed));
  const auto message =
      failure_message(200, done->error, {"CompleteMultipartUpload", "b", "k", "http://e"}, errc::server_error);
  EXPECT_TRUE(contains(message, "HTTP 200")) << message;

  const auto truncated = parse_complete_multipart_upload("<CompleteMultipartUploadResult><ETag>", diag);
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error(), errc::bad_response);
  EXPECT_EQ(diag.message.rfind("CompleteMultipartUpload response is not valid XML", 0), 0u) << diag.message;
}

TEST(s3_xml_multipart, lists_uploads_with_markers) {
  diagnostics diag;
  const auto page = parse_list_multipart_uploads(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>bucket</Bucket>
  <KeyMarker></KeyMarker>
  <UploadIdMarker></UploadIdMarker>
  <NextKeyMarker>my-movie.m2ts</NextKeyMarker>
  <NextUploadIdMarker>YW55IGlkZWEgd2h5IGVsdmluZydzIHVwbG9hZCBmYWlsZWQ</NextUploadIdMarker>
  <MaxUploads>3</MaxUploads>
  <IsTruncated>true</IsTruncated>
  <Upload>
    <Key>my-divisor</Key>
    <UploadId>XMgbGlrZSBlbHZpbmcncyBub3QgaGF2aW5nIG11Y2ggbHVjaw</UploadId>
    <Initiator><ID>arn:aws:iam::111122223333:user/user1</ID><DisplayName>user1</DisplayName></Initiator>
    <Owner><ID>75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a</ID></Owner>
    <StorageClass>STANDARD</StorageClass>
    <Initiated>2010-11-10T20:48:33.000Z</Initiated>
  </Upload>
  <Upload>
    <Key>my-movie.m2ts</Key>
    <UploadId>VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>
    <Initiated>2010-11-10T20:48:33.000Z</Initiated>
  </Upload>
</ListMultipartUploadsResult>)",
                                                 diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->uploads.size(), 2u);
  EXPECT_EQ(page->uploads[0].key, "my-divisor");
  EXPECT_EQ(page->uploads[0].upload_id, "XMgbGlrZSBlbHZpbmcncyBub3QgaGF2aW5nIG11Y2ggbHVjaw");
  EXPECT_EQ(page->uploads[1].initiated, "2010-11-10T20:48:33.000Z");
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_key_marker, "my-movie.m2ts");
  EXPECT_EQ(page->next_upload_id_marker, "YW55IGlkZWEgd2h5IGVsdmluZydzIHVwbG9hZCBmYWlsZWQ");
}

TEST(s3_xml_multipart, lists_parts) {
  diagnostics diag;
  const auto page = parse_list_parts(R"(<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>example-bucket</Bucket><Key>example-object</Key><UploadId>X</UploadId>
  <PartNumberMarker>1</PartNumberMarker><NextPartNumberMarker>3</NextPartNumberMarker>
  <MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>
  <Part><PartNumber>2</PartNumber><ETag>"7778aef83f66abc1fa1e8477f296d394"</ETag><Size>10485760</Size></Part>
  <Part><PartNumber>3</PartNumber><ETag>"aaaa18db4cc2f85cedef654fccc4a4x8"</ETag><Size>10485760</Size></Part>
</ListPartsResult>)",
                                     diag);
  ASSERT_TRUE(page) << diag.message;
  ASSERT_EQ(page->parts.size(), 2u);
  EXPECT_EQ(page->parts[1].part_number, 3);
  EXPECT_EQ(page->parts[0].size, 10485760u);
  EXPECT_EQ(page->next_part_number_marker, 3);
}

// ---------------------------------------------------------------------------------------------
// DeleteObjects

const std::vector<std::string> awkward_keys{"plain", "a&b", "<tag>", "quote\"s and 'apostrophes'",
                                            "sp ace+plus", "\xC3\xA9t\xC3\xA9/\xE6\x97\xA5\xE6\x9C\xAC",
                                            "cr\rlf\n", "tab\there"};

TEST(s3_xml_delete, request_escapes_every_key_so_a_parser_reads_it_back) {
  const auto xml = build_delete_objects(awkward_keys);
  EXPECT_TRUE(contains(xml, "<Quiet>true</Quiet>")) << xml;
  EXPECT_EQ(keys_in(xml, "/Delete/Object/Key"), awkward_keys);
  EXPECT_FALSE(contains(build_delete_objects(awkward_keys, false), "Quiet"));
}

TEST(s3_xml_delete, result_lists_deleted_keys_and_errors) {
  diagnostics diag;
  const auto out = parse_delete_objects(R"(<?xml version="1.0" encoding="UTF-8"?>
<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Deleted><Key>sample1.txt</Key></Deleted>
  <Error><Key>sample2.txt</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>
</DeleteResult>)",
                                        diag);
  ASSERT_TRUE(out) << diag.message;
  EXPECT_EQ(out->deleted, std::vector<std::string>{"sample1.txt"});
  ASSERT_EQ(out->errors.size(), 1u);
  EXPECT_EQ(out->errors[0].key, "sample2.txt");
  EXPECT_EQ(out->errors[0].code, "AccessDenied");
  EXPECT_EQ(out->errors[0].message, "Access Denied");
}

TEST(s3_xml_escape, escapes_markup_quotes_and_control_characters) {
  EXPECT_EQ(xml_escape("a&b<c>\"d\"'e'"), "a&amp;b&lt;c&gt;&quot;d&quot;&apos;e&apos;");
  EXPECT_EQ(xml_escape("\r\n\t\x01"), "&#xD;&#xA;&#x9;&#x1;");
  EXPECT_EQ(xml_escape("\xC3\xA9"), "\xC3\xA9");
}

// ---------------------------------------------------------------------------------------------
// Real responses from moto_server (signature checking off, so plain curl requests are accepted)

struct http_response {
  int status = 0;
  std::string body;
  std::string etag;
};

class s3_xml_moto : public testing::Test {
 protected:
  // One server for the suite: each test works in buckets of its own.
  static void SetUpTestSuite() { moto_ = std::make_unique<test::moto_server>(); }
  static void TearDownTestSuite() { moto_.reset(); }

  // `path_and_query` is already URI-encoded.
  static http_response request(const std::string& method, const std::string& path_and_query,
                               const std::string& body = {}) {
    std::vector<std::string> argv{"curl", "-sS", "-X", method, "-o", "-", "-w", "%{stderr}%{http_code} %header{etag}"};
    if (method == "PUT" || method == "POST") {
      // Without a content type curl sends a form, which moto (through werkzeug) swallows.
      argv.insert(argv.end(), {"-H", "Content-Type: application/octet-stream", "--data-binary", "@-"});
    }
    if (method == "HEAD") argv = {"curl", "-sS", "-I", "-o", "/dev/null", "-w", "%{stderr}%{http_code} %header{etag}"};
    argv.push_back(moto_->endpoint() + path_and_query);
    test::process_options options;
    options.input = body;
    const auto r = test::run(argv, options);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    http_response out;
    const auto space = r.err.rfind(' ');
    const auto code_start = r.err.find_last_not_of("0123456789", space - 1) + 1;
    out.status = std::stoi(r.err.substr(code_start, space - code_start));
    out.etag = r.err.substr(space + 1);
    out.body = r.out;
    return out;
  }

  static void put_object(const std::string& bucket, const std::string& key, const std::string& body) {
    const auto r = request("PUT", "/" + bucket + "/" + uri_encode(key, slash::keep), body);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  static s3_request_info info(std::string_view operation, std::string_view bucket, std::string_view key) {
    return {operation, bucket, key, moto_endpoint()};
  }
  static std::string_view moto_endpoint() {
    static const std::string endpoint = moto_->endpoint();
    return endpoint;
  }

  static inline std::unique_ptr<test::moto_server> moto_;
};

TEST_F(s3_xml_moto, list_objects_v2_pages_through_every_key_and_decodes_them) {
  ASSERT_EQ(request("PUT", "/listing").status, 200);
  std::vector<std::string> keys{"a/1.txt", "a/2 with space.txt", "b&c+d<e>.txt", "\xC3\xA9t\xC3\xA9/\xC3\xBC.bin",
                                "z%25"};
  for (const auto& key : keys) put_object("listing", key, "body of " + key);
  std::sort(keys.begin(), keys.end());

  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  for (;;) {
    auto query = std::string("/listing?list-type=2&max-keys=2&encoding-type=url");
    if (!token.empty()) query += "&continuation-token=" + uri_encode(token);
    const auto response = request("GET", query);
    ASSERT_EQ(response.status, 200) << response.body;
    diagnostics diag;
    const auto page = parse_list_objects_v2(response.body, diag);
    ASSERT_TRUE(page) << diag.message << "\n" << response.body;
    ++pages;
    for (const auto& object : page->contents) {
      seen.push_back(object.key);
      EXPECT_EQ(object.size, ("body of " + object.key).size()) << object.key;
      EXPECT_EQ(object.etag.front(), '"');
    }
    if (!page->is_truncated) break;
    token = page->next_continuation_token;
    ASSERT_LT(pages, 10) << "the listing never ends";
  }
  EXPECT_EQ(seen, keys);
  EXPECT_EQ(pages, 3);

  const auto grouped = request("GET", "/listing?list-type=2&delimiter=%2F&encoding-type=url");
  diagnostics diag;
  const auto page = parse_list_objects_v2(grouped.body, diag);
  ASSERT_TRUE(page) << diag.message;
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"a/", "\xC3\xA9t\xC3\xA9/"}));
}

TEST_F(s3_xml_moto, errors_become_messages_that_name_bucket_and_key) {
  auto response = request("GET", "/no-such-bucket?list-type=2");
  EXPECT_EQ(response.status, 404);
  diagnostics diag;
  auto ec = s3_failure(response.status, find_s3_error(response.body), info("ListObjectsV2", "no-such-bucket", ""),
                       diag);
  EXPECT_EQ(ec, errc::no_such_bucket);
  EXPECT_EQ(diag.message, "bucket 'no-such-bucket' does not exist (endpoint " + moto_->endpoint() + ")");

  ASSERT_EQ(request("PUT", "/errors").status, 200);
  response = request("GET", "/errors/missing/key.bin");
  EXPECT_EQ(response.status, 404);
  const auto error = find_s3_error(response.body);
  ASSERT_TRUE(error) << response.body;
  EXPECT_EQ(error->code, "NoSuchKey");
  EXPECT_FALSE(error->request_id.empty());
  ec = s3_failure(response.status, error, info("GetObject", "errors", "missing/key.bin"), diag);
  EXPECT_EQ(ec, errc::no_such_key);
  EXPECT_TRUE(contains(diag.message, "'missing/key.bin'")) << diag.message;

  response = request("HEAD", "/errors/missing/key.bin");
  EXPECT_EQ(response.status, 404);
  ec = s3_failure(response.status, find_s3_error(response.body), info("HeadObject", "errors", "missing/key.bin"),
                  diag);
  EXPECT_EQ(ec, errc::no_such_key);
  EXPECT_EQ(diag.message.rfind("HTTP 404 from HeadObject", 0), 0u) << diag.message;
}

TEST_F(s3_xml_moto, multipart_upload_round_trip_through_the_builders) {
  ASSERT_EQ(request("PUT", "/multipart").status, 200);
  const std::string key = "layers/a&b c.zip";
  const auto path = "/multipart/" + uri_encode(key, slash::keep);

  auto response = request("POST", path + "?uploads");
  ASSERT_EQ(response.status, 200) << response.body;
  diagnostics diag;
  const auto upload_id = parse_initiate_multipart_upload(response.body, diag);
  ASSERT_TRUE(upload_id) << diag.message << "\n" << response.body;

  response = request("GET", "/multipart?uploads&encoding-type=url");
  ASSERT_EQ(response.status, 200) << response.body;
  const auto uploads = parse_list_multipart_uploads(response.body, diag);
  ASSERT_TRUE(uploads) << diag.message << "\n" << response.body;
  ASSERT_EQ(uploads->uploads.size(), 1u) << response.body;
  EXPECT_EQ(uploads->uploads[0].key, key);
  EXPECT_EQ(uploads->uploads[0].upload_id, *upload_id);
  EXPECT_FALSE(uploads->is_truncated);

  const std::string body = "the only part";
  response = request("PUT", path + "?partNumber=1&uploadId=" + uri_encode(*upload_id), body);
  ASSERT_EQ(response.status, 200) << response.body;
  const auto part_etag = response.etag;
  ASSERT_FALSE(part_etag.empty());

  response = request("GET", path + "?uploadId=" + uri_encode(*upload_id));
  ASSERT_EQ(response.status, 200) << response.body;
  const auto parts = parse_list_parts(response.body, diag);
  ASSERT_TRUE(parts) << diag.message << "\n" << response.body;
  ASSERT_EQ(parts->parts.size(), 1u);
  EXPECT_EQ(parts->parts[0].size, body.size());
  EXPECT_EQ(parts->parts[0].etag, part_etag);

  const std::vector<completed_part> completed{{1, part_etag}};
  response = request("POST", path + "?uploadId=" + uri_encode(*upload_id), build_complete_multipart_upload(completed));
  ASSERT_EQ(response.status, 200) << response.body;
  const auto done = parse_complete_multipart_upload(response.body, diag);
  ASSERT_TRUE(done) << diag.message << "\n" << response.body;
  EXPECT_FALSE(done->error);
  EXPECT_EQ(done->key, key);
  EXPECT_TRUE(done->etag.ends_with("-1\"")) << done->etag;
  EXPECT_EQ(request("GET", path).body, body);

  response = request("GET", "/multipart?uploads");
  const auto after = parse_list_multipart_uploads(response.body, diag);
  ASSERT_TRUE(after) << diag.message;
  EXPECT_TRUE(after->uploads.empty());

  // The completed upload is gone; the message names it and its key.
  response = request("GET", path + "?uploadId=" + uri_encode(*upload_id));
  EXPECT_EQ(response.status, 404) << response.body;
  const auto ec = s3_failure(response.status, find_s3_error(response.body), info("ListParts", "multipart", key), diag);
  EXPECT_EQ(ec, errc::no_such_upload) << diag.message;
  EXPECT_TRUE(contains(diag.message, *upload_id)) << diag.message;
  EXPECT_TRUE(contains(diag.message, "'layers/a&b c.zip'")) << diag.message;
}

TEST_F(s3_xml_moto, delete_objects_with_awkward_keys) {
  ASSERT_EQ(request("PUT", "/deleting").status, 200);
  // Keys moto stores through a URL path; control characters are left to the offline tests.
  const std::vector<std::string> keys{"plain", "a&b", "<tag>", "quote\"s and 'apostrophes'", "sp ace+plus",
                                      "\xC3\xA9t\xC3\xA9/\xE6\x97\xA5\xE6\x9C\xAC"};
  for (const auto& key : keys) put_object("deleting", key, "x");

  const auto response = request("POST", "/deleting?delete", build_delete_objects(keys, false));
  ASSERT_EQ(response.status, 200) << response.body;
  diagnostics diag;
  const auto out = parse_delete_objects(response.body, diag);
  ASSERT_TRUE(out) << diag.message << "\n" << response.body;
  EXPECT_TRUE(out->errors.empty());
  auto deleted = out->deleted;
  auto expected = keys;
  std::sort(deleted.begin(), deleted.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(deleted, expected);

  const auto listing = parse_list_objects_v2(request("GET", "/deleting?list-type=2").body, diag);
  ASSERT_TRUE(listing) << diag.message;
  EXPECT_TRUE(listing->contents.empty());
}

}  // namespace
}  // namespace ferry::net
