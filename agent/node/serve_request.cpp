#include "agent/node/serve_request.hpp"

#include "agent/node/plan_reader.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

#include <sys/stat.h>

namespace ferry::agent::node {

namespace json = boost::json;
using namespace plan_reading;

std::string serve_request_line(const serve_request& r) {
  return json::serialize(json::object{{"serve", json::object{{"task_id", r.task_id},
                                                             {"cache_dir", r.cache_dir},
                                                             {"serve_id", r.serve_id},
                                                             {"token", r.token},
                                                             {"bind", r.bind},
                                                             {"wait_ms", r.wait_ms},
                                                             {"read_timeout_ms", r.limits.read_timeout_ms},
                                                             {"shutdown_grace_ms", r.limits.shutdown_grace_ms}}}});
}

result<serve_request> parse_serve_request(std::string_view line, diagnostics& diag) {
  json::error_code jec;
  const auto doc = json::parse(line, jec);
  const auto* top = jec ? nullptr : object_of(doc);
  const auto* inner = top && top->contains("serve") ? object_of(top->at("serve")) : nullptr;
  if (!inner) return bad(diag, "the serve request is not {\"serve\": {...}}");
  reader r{*inner, "serve", diag, {}};
  serve_request out;
  out.task_id = r.text("task_id");
  out.cache_dir = r.text("cache_dir");
  out.serve_id = r.text("serve_id");
  out.token = r.text("token");
  out.bind = r.text("bind");
  out.wait_ms = static_cast<std::int64_t>(std::clamp<std::uint64_t>(r.number_or("wait_ms", 30'000), 1, 3'600'000));
  out.limits.read_timeout_ms =
      static_cast<std::int64_t>(std::clamp<std::uint64_t>(r.number_or("read_timeout_ms", 60'000), 1, 86'400'000));
  out.limits.shutdown_grace_ms = static_cast<std::int64_t>(
      std::clamp<std::uint64_t>(r.number_or("shutdown_grace_ms", out.limits.shutdown_grace_ms), 1, 86'400'000));
  if (r.ec) return r.ec;
  if (out.serve_id.empty() || out.serve_id.size() > 64 || !is_hex(out.serve_id))
    return bad(diag, "the serve request's serve_id is not hex");
  if (out.token.size() != 64 || !is_hex(out.token)) return bad(diag, "the serve request's token is not 64 hex digits");
  if (!one_line(out.cache_dir)) return bad(diag, "the serve request's cache_dir holds a line break");
  error_code ec;
  boost::asio::ip::make_address(out.bind, ec);
  if (ec) return bad(diag, fmt::format("the serve request's bind '{}' is not an IP address", out.bind));
  return out;
}

std::string serve_dir_of(const std::string& cache_dir, const std::string& serve_id) {
  const auto parent = cache_dir + "/serve";
  ::mkdir(parent.c_str(), 0700);
  const auto dir = parent + "/" + serve_id;
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

}  // namespace ferry::agent::node
