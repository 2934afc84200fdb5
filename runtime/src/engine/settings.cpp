#include "fvi/engine/settings.h"

#include <sstream>
#include <stdexcept>

namespace fvi::engine {

std::string DivergenceSpec::name() const {
  std::ostringstream os;
  switch (kind) {
    case DivergenceKind::kKl: return "kl";
    case DivergenceKind::kReverseKl: return "rkl";
    case DivergenceKind::kFisherRao: return "fisher_rao";
    case DivergenceKind::kNone: return "none";
    case DivergenceKind::kWeightedKl: os << "weighted_kl(" << parameter << ")"; break;
    case DivergenceKind::kAlphaRenyi: os << "alpha_renyi(" << parameter << ")"; break;
  }
  return os.str();
}

Settings::Settings(const std::vector<std::pair<std::string, std::string>>& block,
                   const std::vector<std::string>& overrides) {
  for (const auto& [key, value] : block) set(key, value, "the model's inference block");
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument("--set " + o + ": expected key=value, e.g. --set rounds=20");
    set(o.substr(0, eq), o.substr(eq + 1), "--set");
    overridden_.insert(o.substr(0, eq));
  }
}

void Settings::set(const std::string& key, const std::string& text, const char* origin) {
  const fvic::stdlib::KeySpec* spec = fvic::stdlib::find_key(key);
  if (!spec) {
    std::string hint = fvic::stdlib::suggest_key(key);
    throw std::invalid_argument(std::string(origin) + ": unknown inference key '" + key + "'" +
                                (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                                " (`fvic help keys` lists them)");
  }
  std::string error;
  auto value = fvic::stdlib::parse_key_value(text, &error);
  if (!value) throw std::invalid_argument(std::string(origin) + ": " + key + " = " + text + ": " + error);
  std::string why = fvic::stdlib::validate_key_value(*spec, *value);
  if (!why.empty()) throw std::invalid_argument(std::string(origin) + ": " + key + " = " + text + ": " + why);
  values_[key] = *value;
}

std::string Settings::name(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second.text;
}

double Settings::number(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second.number;
}

long Settings::integer(const std::string& key, long fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : static_cast<long>(it->second.number);
}

LossSpec Settings::loss() const {
  auto it = values_.find("loss");
  if (it == values_.end()) return LossSpec::nll();
  const auto& v = it->second;
  const double p = v.args.empty() ? 0 : v.args[0].number;
  if (v.text == "nll") return LossSpec::nll();
  if (v.text == "gce") return LossSpec::generalized_cross_entropy(p);
  if (v.text == "density_power") return LossSpec::density_power(p);
  if (v.text == "gamma") return LossSpec::gamma(p);
  if (v.text == "score_matching") return LossSpec::nll();
  throw std::invalid_argument("loss = " + v.str() + " is not available to this engine yet");
}

bool Settings::score_matching(std::string& weight, double& length_scale) const {
  auto it = values_.find("loss");
  if (it == values_.end() || it->second.text != "score_matching") return false;
  const auto& args = it->second.args;
  weight = args.size() > 0 ? args[0].text : "se";
  length_scale = args.size() > 1 ? args[1].number : 1.0;
  return true;
}

DivergenceSpec Settings::divergence() const {
  auto it = values_.find("divergence");
  if (it == values_.end()) return {};
  const auto& v = it->second;
  const double p = v.args.empty() ? 1 : v.args[0].number;
  if (v.text == "kl") return {DivergenceKind::kKl, 1};
  if (v.text == "rkl") return {DivergenceKind::kReverseKl, 1};
  if (v.text == "weighted_kl") return {DivergenceKind::kWeightedKl, p};
  if (v.text == "alpha_renyi") return {DivergenceKind::kAlphaRenyi, p};
  return {DivergenceKind::kFisherRao, 1};
}

std::vector<std::pair<std::string, std::string>> Settings::entries() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : values_) out.push_back({k, v.str()});
  return out;
}

}  // namespace fvi::engine
