#pragma once
// Whether the storage.url prefix can be listed, and written: a small object put under it
// (PREFIX/.ferry-doctor-<random>) and deleted again. A refusal is named by its S3 error code, each with its
// own fix: a missing bucket, access denied, a secret that does not match its key id, an unknown key id.
#include "agent/doctor/check.hpp"
#include "agent/doctor/storage_link.hpp"
#include "net/s3_url.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>

namespace ferry::agent::doctor {

struct bucket_target {
  net::s3_url url;           // storage.url
  std::string key_id;        // masked: mask_key_id()
  std::string creds_source;  // where the credentials were found
};

boost::asio::awaitable<check_result> check_list(tracing::action& parent, storage_link& link, const bucket_target& t);
boost::asio::awaitable<check_result> check_write(tracing::action& parent, storage_link& link, const bucket_target& t);

// "AKIA…WXYZ": enough of an access key id to recognise it, as consoles show it.
std::string mask_key_id(std::string_view id);

}  // namespace ferry::agent::doctor
