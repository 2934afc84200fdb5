#pragma once
// The inference keys a program runs with: the model's `inference` block, then `--set key=value`
// overrides, each validated against the one key table (stdlib/inference_keys.h) that the compiler
// also uses. Typed accessors give each key's value or its documented default.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fvi/loss/robust_loss.h"
#include "inference_keys.h"

namespace fvi::engine {

// kNone: no divergence in weight space (the function-space methods put theirs in the loss's
// place, fvi/engine/function_space.h); the engine sets it, no key names it.
enum class DivergenceKind { kKl, kReverseKl, kWeightedKl, kAlphaRenyi, kFisherRao, kNone };
struct DivergenceSpec {
  DivergenceKind kind = DivergenceKind::kKl;
  double parameter = 1;
  std::string name() const;
};

class Settings {
 public:
  // `block`: key = value pairs of the model's inference block (already checked by fvic);
  // `overrides`: "key=value" strings from the command line. Throws std::invalid_argument with a
  // sentence naming the key when an override is unknown or its value is not accepted.
  Settings(const std::vector<std::pair<std::string, std::string>>& block, const std::vector<std::string>& overrides);

  bool has(const std::string& key) const { return values_.count(key) > 0; }
  // Whether the command line set `key` (--set), rather than the model's inference block.
  bool overridden(const std::string& key) const { return overridden_.count(key) > 0; }
  std::string name(const std::string& key, const std::string& fallback) const;
  double number(const std::string& key, double fallback) const;
  long integer(const std::string& key, long fallback) const;
  // The loss; for score_matching(...) the NLL's spec is returned and score_matching() says so.
  LossSpec loss() const;
  // score_matching(se|imq, c): the weight's kind and length scale c; false for any other loss.
  bool score_matching(std::string& weight, double& length_scale) const;
  DivergenceSpec divergence() const;
  // key = value lines of every key set, for the configuration echo at start.
  std::vector<std::pair<std::string, std::string>> entries() const;

 private:
  void set(const std::string& key, const std::string& value, const char* origin);
  std::map<std::string, fvic::stdlib::KeyValue> values_;
  std::set<std::string> overridden_;
};

}  // namespace fvi::engine
