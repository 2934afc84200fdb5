#include "generic/silo_audit.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace fvic::generic {

namespace {

nlohmann::json parsed(const std::string& text, const std::string& what) {
  nlohmann::json plan = nlohmann::json::parse(text, nullptr, false);
  if (plan.is_discarded() || !plan.is_object() || !plan.contains("messages") || !plan["messages"].is_array())
    throw std::invalid_argument(what + " is not a plan as `fvic plan --json MODEL` writes it");
  return plan;
}

std::string text_of(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

}  // namespace

std::vector<SentMessage> silo_messages(const std::string& plan_json, const std::string& what) {
  const nlohmann::json plan = parsed(plan_json, what);
  std::vector<SentMessage> out;
  const std::pair<const char*, const char*> lists[] = {
      {"messages", "each iteration"}, {"closing_messages", "once, at the end"}, {"rule_messages", "for the stopping rule"}};
  for (const auto& [key, when] : lists) {
    if (!plan.contains(key)) continue;
    if (!plan[key].is_array()) throw std::invalid_argument(what + ": '" + key + "' is not a list");
    for (const nlohmann::json& m : plan[key])
      if (m.is_object() && text_of(m, "from").rfind("silo", 0) == 0)
        out.push_back({when, text_of(m, "content"), text_of(m, "doubles")});
  }
  return out;
}

std::vector<std::string> never_leaves_silo(const std::string& plan_json) {
  const nlohmann::json plan = parsed(plan_json, "the plan");
  std::vector<std::string> out;
  if (plan.contains("never_leaves_silo") && plan["never_leaves_silo"].is_array())
    for (const nlohmann::json& s : plan["never_leaves_silo"])
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

std::string audit_text(const std::string& model, const std::string& sha256, const std::string& plan_json) {
  std::ostringstream o;
  o << "model " << model << " (SHA-256 " << sha256 << "): under its plan this silo sends the server\n";
  for (const SentMessage& m : silo_messages(plan_json, "the model's plan"))
    o << "  " << m.when << ": " << m.content << "; " << m.doubles << " doubles\n";
  std::string stays;
  for (const std::string& s : never_leaves_silo(plan_json)) stays += (stays.empty() ? "" : ", ") + s;
  if (!stays.empty()) o << "  never leaves this silo: " << stays << '\n';
  return o.str();
}

std::vector<SentMessage> not_agreed(const std::vector<SentMessage>& proposed, const std::vector<SentMessage>& agreed) {
  std::vector<SentMessage> out;
  for (const SentMessage& m : proposed)
    if (std::find(agreed.begin(), agreed.end(), m) == agreed.end()) out.push_back(m);
  return out;
}

}  // namespace fvic::generic
