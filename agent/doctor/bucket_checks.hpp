#pragma once
// Whether the storage.url prefix can be listed, and written: a small object put under it
// (PREFIX/.ferry-doctor-<random>) and deleted again. A refusal is named by its S3 error code, each with its
// own fix: a missing bucket, access denied, a secret that does not match its key id, an unknown key id.
#include "agent/doctor/check.hpp"
#include "agent/doctor/storage_link.hpp"
#include "config/s3_url.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>

namespace ferry::agent::doctor {

struct bucket_target {
  config::s3_url url;        // storage.url
  std::string key_id;        // masked: mask_key_id()
  std::string creds_source;  // where the credentials were found
};

boost::asio::awaitable<check_result> check_list(tracing::action& parent, storage_link& link, const bucket_target& t);
// `key`: probe_key(t.url), chosen by the caller so that it can name the key even when the check is cut off.
boost::asio::awaitable<check_result> check_write(tracing::action& parent, storage_link& link, const bucket_target& t,
                                                 std::string key);

// A key no other doctor (nor anything of ferry's) uses: PREFIX/.ferry-doctor-<16 hex digits>.
std::string probe_key(const config::s3_url& url);

// The write check's result when the probe at `key` may be left behind: named, with the command that removes it.
check_result left_behind(check_result out, std::string_view bucket, std::string_view key, std::string_view how);

// "AKIA…WXYZ": enough of an access key id to recognise it, as consoles show it.
std::string mask_key_id(std::string_view id);

}  // namespace ferry::agent::doctor
