#pragma once
// The inference keys: what may appear in an `inference { }` block or after `--set`, and what
// values each accepts. One table for the checker, the planner and the generated programs.
#include <optional>
#include <string>
#include <vector>

namespace fvic::stdlib {

// A value as written: `auto`, `0.5`, `gce(0.8)`, `score_matching(imq, 1.0)`.
struct KeyValue {
  enum class Kind { Name, Number, String } kind = Kind::Name;
  std::string text;
  double number = 0;
  bool is_integer = false;
  std::vector<KeyValue> args;
  bool has_call = false;

  std::string str() const;  // printed back in the source form
};

// Parses the right side of `--set key=value`; nullopt (and `error`) if it is not a value.
std::optional<KeyValue> parse_key_value(const std::string& text, std::string* error);

struct KeySpec {
  const char* key;
  const char* values;   // what is accepted, in words, for messages and `fvic help`
  const char* meaning;  // one line
  const char* default_value;
};

const std::vector<KeySpec>& inference_keys();
const KeySpec* find_key(const std::string& key);

// Checks `value` against the key's accepted values. Returns an empty string if valid, else a
// sentence saying what is wrong and what is accepted.
std::string validate_key_value(const KeySpec& spec, const KeyValue& value);

// PVI's client schedule when the model sets none, from the loss's name: synchronous for the
// negative log likelihood (the server damps silos updating at once); sequential for any other
// loss, whose objective need not be convex: silos updating at once from the same q_s can settle
// in another of its optima (examples/robust_logreg_2d: synchronous FedGVI reached the optimum
// that fits the outliers, 0.2 lower in the objective than the sequential schedule's).
const char* default_pvi_schedule(const std::string& loss_name);

// PVI's family when the model sets none: full-rank up to kPviFullRankAutoLimit global values (the
// posterior's correlations kept: a mean-field q of a logistic regression on 8 correlated features
// gave k-hat 0.78 where full-rank gives 0.33, examples/pima_logreg), mean-field above (the natural
// parameters grow as G^2 / 2) and for divergence = fisher_rao (its closed form is univariate).
// `global_values` is nullopt when the size depends on data the caller does not have: taken small.
inline constexpr long long kPviFullRankAutoLimit = 50;
const char* default_pvi_family(std::optional<long long> global_values, const std::string& divergence_name);

// Levenshtein distance: the number of one-character edits from a to b (for "did you mean").
// Levenshtein distance, or `limit` when it is at least that: only the band of width 2 limit + 1
// is computed, so a suggestion for a 500 KB name costs O(limit x length), not O(length^2)
// (issue 27 item 9).
size_t edit_distance(const std::string& a, const std::string& b, size_t limit = 8);

// The closest known key to a misspelt one ("dampng" -> "damping"), or empty.
std::string suggest_key(const std::string& key);

// The closest accepted name for a misspelt value of `spec` ("fullrnk" -> "fullrank"), or empty.
std::string suggest_value(const KeySpec& spec, const KeyValue& value);

}  // namespace fvic::stdlib
