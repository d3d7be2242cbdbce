#include "provision/ec2/response.hpp"

#include "net/error.hpp"
#include "provision/ec2/api_error.hpp"

#include <fmt/format.h>
#include <pugixml.hpp>

#include <charconv>

namespace ferry::provision::ec2 {
namespace {

std::string text(pugi::xml_node parent, const char* name) { return parent.child(name).child_value(); }

error_code bad_response(diagnostics& diag, std::string message) {
  diag.set(std::move(message));
  return make_error_code(net::errc::bad_response);
}

// Parses `body` into `doc` and returns its root, which must be <{action}Response>.
result<pugi::xml_node> load(pugi::xml_document& doc, std::string_view body, std::string_view action,
                            diagnostics& diag) {
  const auto parsed = doc.load_buffer(body.data(), body.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!parsed) {
    return bad_response(diag, fmt::format("{} response is not valid XML: {} at byte {} of {}", action,
                                          parsed.description(), parsed.offset, body.size()));
  }
  const auto root = doc.document_element();
  const std::string_view name = root.name();
  if (name.size() == action.size() + 8 && name.starts_with(action) && name.ends_with("Response")) return root;
  if (const auto error = find_api_error(body)) {
    return bad_response(diag, fmt::format("{} answered with an EC2 error: {}: {}", action, error->code,
                                          error->message));
  }
  return bad_response(diag, fmt::format("{} response is a <{}> document, not <{}Response>", action, name, action));
}

template <class Number>
bool parse_number(std::string_view digits, Number& out) {
  const auto* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, out);
  return ec == std::errc() && ptr == end && !digits.empty();
}

// A numeric element under `parent` (a path such as "vCpuInfo/defaultVCpus"), which must be present.
template <class Number>
result<Number> number(pugi::xml_node parent, const char* path, std::string_view action, std::string_view what,
                      diagnostics& diag) {
  const std::string value = parent.first_element_by_path(path).child_value();
  Number out{};
  if (parse_number(value, out)) return out;
  return bad_response(diag, fmt::format("{} response: <{}> of {} is not a number: '{}'", action, path, what, value));
}

std::vector<std::string> item_texts(pugi::xml_node set) {
  std::vector<std::string> out;
  for (const auto item : set.children("item")) out.emplace_back(item.child_value());
  return out;
}

std::map<std::string, std::string> tags_of(pugi::xml_node instance) {
  std::map<std::string, std::string> out;
  for (const auto item : instance.child("tagSet").children("item")) out[text(item, "key")] = text(item, "value");
  return out;
}

result<instance> read_instance(pugi::xml_node item, std::string_view action, diagnostics& diag) {
  instance out;
  out.id = text(item, "instanceId");
  if (out.id.empty())
    return bad_response(diag, fmt::format("{} response has an instance without <instanceId>", action));
  out.type = text(item, "instanceType");
  out.state = item.first_element_by_path("instanceState/name").child_value();
  const auto reason = item.child("stateReason");
  out.state_reason = text(reason, "message");
  if (out.state_reason.empty()) out.state_reason = text(item, "reason");
  out.availability_zone = item.first_element_by_path("placement/availabilityZone").child_value();
  out.private_ip = text(item, "privateIpAddress");
  out.public_ip = text(item, "ipAddress");
  out.subnet_id = text(item, "subnetId");
  out.vpc_id = text(item, "vpcId");
  out.image_id = text(item, "imageId");
  out.key_name = text(item, "keyName");
  out.lifecycle = text(item, "instanceLifecycle");
  out.launch_time = text(item, "launchTime");
  out.tags = tags_of(item);
  return out;
}

error_code read_instances(pugi::xml_node set, std::vector<instance>& out, std::string_view action,
                          diagnostics& diag) {
  for (const auto item : set.children("item")) {
    auto one = read_instance(item, action, diag);
    if (!one) return one.error();
    out.push_back(std::move(*one));
  }
  return {};
}

result<instance_type_info> read_instance_type(pugi::xml_node item, diagnostics& diag) {
  constexpr std::string_view action = "DescribeInstanceTypes";
  instance_type_info out;
  out.name = text(item, "instanceType");
  if (out.name.empty()) return bad_response(diag, "DescribeInstanceTypes response has a type without <instanceType>");
  auto vcpus = number<int>(item, "vCpuInfo/defaultVCpus", action, out.name, diag);
  if (!vcpus) return vcpus.error();
  auto memory = number<std::int64_t>(item, "memoryInfo/sizeInMiB", action, out.name, diag);
  if (!memory) return memory.error();
  out.vcpus = *vcpus;
  out.memory_mib = *memory;
  out.architectures = item_texts(item.first_element_by_path("processorInfo/supportedArchitectures"));
  out.usage_classes = item_texts(item.child("supportedUsageClasses"));
  out.current_generation = text(item, "currentGeneration") == "true";
  return out;
}

result<spot_price> read_spot_price(pugi::xml_node item, diagnostics& diag) {
  spot_price out;
  out.instance_type = text(item, "instanceType");
  out.availability_zone = text(item, "availabilityZone");
  out.product_description = text(item, "productDescription");
  out.timestamp = text(item, "timestamp");
  if (out.instance_type.empty())
    return bad_response(diag, "DescribeSpotPriceHistory response has a price without <instanceType>");
  auto price = number<double>(item, "spotPrice", "DescribeSpotPriceHistory", out.instance_type, diag);
  if (!price) return price.error();
  out.price = *price;
  return out;
}

}  // namespace

result<key_pair_info> parse_import_key_pair(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "ImportKeyPair", diag);
  if (!root) return root.error();
  key_pair_info out{text(*root, "keyName"), text(*root, "keyFingerprint")};
  if (out.name.empty()) return bad_response(diag, "ImportKeyPair response has no <keyName>");
  return out;
}

result<std::vector<instance>> parse_run_instances(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "RunInstances", diag);
  if (!root) return root.error();
  std::vector<instance> out;
  if (auto ec = read_instances(root->child("instancesSet"), out, "RunInstances", diag)) return ec;
  if (out.empty()) return bad_response(diag, "RunInstances response holds no instance");
  return out;
}

result<instances_page> parse_describe_instances(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "DescribeInstances", diag);
  if (!root) return root.error();
  instances_page page;
  for (const auto reservation : root->child("reservationSet").children("item")) {
    if (auto ec = read_instances(reservation.child("instancesSet"), page.instances, "DescribeInstances", diag))
      return ec;
  }
  page.next_token = text(*root, "nextToken");
  return page;
}

result<std::vector<state_change>> parse_terminate_instances(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "TerminateInstances", diag);
  if (!root) return root.error();
  std::vector<state_change> out;
  for (const auto item : root->child("instancesSet").children("item")) {
    out.push_back({text(item, "instanceId"), item.first_element_by_path("currentState/name").child_value(),
                   item.first_element_by_path("previousState/name").child_value()});
  }
  return out;
}

result<instance_types_page> parse_describe_instance_types(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "DescribeInstanceTypes", diag);
  if (!root) return root.error();
  instance_types_page page;
  for (const auto item : root->child("instanceTypeSet").children("item")) {
    auto one = read_instance_type(item, diag);
    if (!one) return one.error();
    page.types.push_back(std::move(*one));
  }
  page.next_token = text(*root, "nextToken");
  return page;
}

result<spot_prices_page> parse_describe_spot_price_history(std::string_view body, diagnostics& diag) {
  pugi::xml_document doc;
  const auto root = load(doc, body, "DescribeSpotPriceHistory", diag);
  if (!root) return root.error();
  spot_prices_page page;
  for (const auto item : root->child("spotPriceHistorySet").children("item")) {
    auto one = read_spot_price(item, diag);
    if (!one) return one.error();
    page.prices.push_back(std::move(*one));
  }
  page.next_token = text(*root, "nextToken");
  return page;
}

}  // namespace ferry::provision::ec2
