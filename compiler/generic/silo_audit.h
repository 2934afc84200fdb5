#pragma once
// A silo's audit of a model before it joins a run (fvi-client): what it will send under the
// model's plan, what never leaves it, and whether that is what its data owner agreed to, a plan
// saved by `fvic plan --json MODEL > FILE` from the model they reviewed.
#include <string>
#include <vector>

namespace fvic::generic {

// One message a silo sends: when (each iteration, once at the end, for the stopping rule), what,
// and how many doubles (a formula in the data's sizes).
struct SentMessage {
  std::string when, content, doubles;
  bool operator==(const SentMessage& o) const { return when == o.when && content == o.content && doubles == o.doubles; }
};

// The messages silos send under a plan, from its `fvic plan --json` text; throws
// std::invalid_argument naming `what` when the text is not such a plan.
std::vector<SentMessage> silo_messages(const std::string& plan_json, const std::string& what);

// What never leaves a silo under the plan, as `fvic plan` words it.
std::vector<std::string> never_leaves_silo(const std::string& plan_json);

// What the silo prints before it joins: the messages and what stays.
std::string audit_text(const std::string& model, const std::string& sha256, const std::string& plan_json);

// The messages of `proposed` that `agreed` does not send (empty: the silo may join).
std::vector<SentMessage> not_agreed(const std::vector<SentMessage>& proposed, const std::vector<SentMessage>& agreed);

}  // namespace fvic::generic
