#pragma once
// Owning handles for libssh's C objects, so that every early return frees what it made.
#include <libssh/libssh.h>

#include <memory>
#include <string>

namespace ferry::net::libssh {

struct session_free {
  void operator()(ssh_session s) const { ssh_free(s); }
};
struct channel_free {
  void operator()(ssh_channel c) const { ssh_channel_free(c); }
};
struct key_free {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
struct event_free {
  void operator()(ssh_event e) const { ssh_event_free(e); }
};
struct string_free {
  void operator()(char* s) const { ssh_string_free_char(s); }
};

using session_ptr = std::unique_ptr<ssh_session_struct, session_free>;
using channel_ptr = std::unique_ptr<ssh_channel_struct, channel_free>;
using key_ptr = std::unique_ptr<ssh_key_struct, key_free>;
using event_ptr = std::unique_ptr<ssh_event_struct, event_free>;
using string_ptr = std::unique_ptr<char, string_free>;

// libssh's last error on a session, as text for diagnostics.
inline std::string last_error(ssh_session s) {
  const char* text = ssh_get_error(s);
  return text && *text ? text : "unknown libssh error";
}

}  // namespace ferry::net::libssh
