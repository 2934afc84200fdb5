// Inference settings: the `inference` block's keys and values checked against stdlib's key
// specs (the checker, checker_impl.h), `--set key=value` overrides on top of them, and lookups.
#include "frontend/checker_impl.h"

#include "builtins.h"

namespace fvic {

std::string InferenceSettings::name(const std::string& key, const std::string& fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second.text;
}

Loc InferenceSettings::loc(const std::string& key) const {
  auto it = locs.find(key);
  return it == locs.end() ? Loc{} : it->second;
}

bool apply_overrides(InferenceSettings& settings, const std::vector<std::string>& overrides,
                     std::string* error) {
  for (const std::string& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos) {
      *error = "--set expects key=value, got '" + o + "'";
      return false;
    }
    std::string key = o.substr(0, eq);
    const stdlib::KeySpec* spec = stdlib::find_key(key);
    if (!spec) {
      std::string near = stdlib::suggest_key(key);
      *error = "--set: unknown inference key '" + key + "'" +
               (near.empty() ? "" : "; did you mean '" + near + "'?");
      return false;
    }
    std::string why;
    auto value = stdlib::parse_key_value(o.substr(eq + 1), &why);
    if (!value) {
      *error = "--set " + key + ": " + why;
      return false;
    }
    std::string invalid = stdlib::validate_key_value(*spec, *value);
    if (!invalid.empty()) {
      *error = "--set " + key + ": " + invalid;
      return false;
    }
    settings.values[key] = *value;
    settings.locs[key] = Loc{};
  }
  return true;
}

namespace check_detail {

// ---- inference block -----------------------------------------------------------------------

void Checker::check_settings(const Block& b) {
  InferenceSettings& out = model_.settings;
  for (const Setting& s : b.settings) {
    const stdlib::KeySpec* spec = stdlib::find_key(s.key);
    if (!spec) {
      std::string near = stdlib::suggest_key(s.key);
      diags_.error(s.key_loc, "unknown inference key '" + s.key + "'",
                   near.empty() ? "see `fvic help keys` for the keys" : "did you mean '" + near + "'?");
      continue;
    }
    if (out.has(s.key)) {
      diags_.error(s.key_loc, "'" + s.key + "' is set twice",
                   "it was set on line " + std::to_string(out.loc(s.key).line) + "; keep one");
      continue;
    }
    std::string why = stdlib::validate_key_value(*spec, s.value);
    if (!why.empty()) {
      // The message says what is accepted; the help suggests a spelling or says what the key is.
      std::string near = stdlib::suggest_value(*spec, s.value);
      std::string help = s.key + ": " + spec->meaning;
      if (*spec->default_value) help += std::string(" (default ") + spec->default_value + ")";
      if (why.find("accepted:") == std::string::npos && (s.key == "loss" || s.key == "divergence"))
        help = "'" + s.key + "' accepts " + spec->values;
      diags_.error(s.value_loc, why, near.empty() ? help : "did you mean '" + near + "'?");
      continue;
    }
    out.values[s.key] = s.value;
    out.locs[s.key] = s.value_loc;  // errors about a setting (e.g. an unusable method) mark its value
  }
}

}  // namespace check_detail
}  // namespace fvic
