#include "driver/summary.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <utility>
#include <vector>

#include "fvi/program/draws_csv.h"
#include "fvi/program/summary.h"

namespace fvic::driver {

namespace {

const char* const kKhat = "k\xCC\x82";  // k̂

// Pareto k̂ of log_p__ - log_g__ (PSIS, Vehtari et al.) read as loo reads it.
std::string khat_reading(const std::string& text) {
  char* end = nullptr;
  const double k = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') return text;
  if (std::isnan(k)) return text + "  not computed";
  const char* reading = k < 0.5    ? "good"
                        : k <= 0.7 ? "usable"
                                   : "poor: q misses where the posterior has mass; its draws are not to be trusted";
  return text + "  " + reading + " (< 0.5 good, 0.5-0.7 usable, > 0.7 poor)";
}

std::string converged_reading(const std::string& text) {
  if (text == "1") return "yes";
  if (text == "0") return "no: the stopping rule was not met (the run's last line says why)";
  return text;
}

}  // namespace

int summary_command(const std::string& out, const std::optional<long>& silo) {
  namespace fs = std::filesystem;
  std::error_code error;
  std::string path = out;
  if (fs::is_directory(out, error)) {
    fs::path dir(out);
    if (silo) {
      dir /= "silo-" + std::to_string(*silo);
      if (!fs::is_directory(dir, error)) {
        std::cerr << "fvic: " << out << " has no silo " << *silo << " (no " << dir.string() << ")\n";
        return 1;
      }
    }
    path = (dir / "draws.csv").string();
  } else if (silo) {
    std::cerr << "fvic: --silo needs the run's output directory; " << out << " is not a directory\n";
    return 1;
  }

  fvi::program::DrawsTable table;
  try {
    table = fvi::program::read_draws_csv(path);
  } catch (const std::bad_alloc&) {
    std::cerr << "fvic: " << path << " is too large to summarise in memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "fvic: " << e.what() << '\n';
    return 1;
  }
  if (table.draws() == 0) {
    std::cerr << "fvic: " << path << " holds no draws, only its header\n";
    return 1;
  }

  // lp__, log_p__, log_g__ (and a sampler's columns) end in "__": they are not variables.
  std::vector<fvi::program::SummaryRow> rows;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const std::string& name = table.columns[c];
    if (name.size() > 2 && name.compare(name.size() - 2, 2, "__") == 0) continue;
    rows.push_back(fvi::program::summarise(fvi::program::posterior_name(name), table.values[c]));
  }

  const std::string* model = table.comment("model");
  std::cout << path << ": " << (model ? "model " + *model + ", " : "") << table.draws() << " draws from q\n";
  std::vector<std::pair<std::string, std::string>> facts, settings;
  for (const auto& [key, value] : table.comments) {
    if (key.rfind("fvic_set_", 0) == 0) settings.emplace_back(key.substr(9), value);
    else if (key.rfind("fvic_", 0) == 0) facts.emplace_back(key.substr(5), value);
  }
  auto fact = [&](const char* key) -> const std::string* {
    for (const auto& [k, v] : facts)
      if (k == key) return &v;
    return nullptr;
  };
  // What the run recorded about itself; the three a reader needs first are always named.
  std::vector<std::pair<std::string, std::string>> lines;
  if (const std::string* method = fact("method")) lines.emplace_back("method", *method);
  const std::string* iterations = fact("iterations");
  const std::string* converged = fact("converged");
  const std::string* khat = fact("khat");
  lines.emplace_back("iterations", iterations ? *iterations : "not recorded");
  lines.emplace_back("converged", converged ? converged_reading(*converged) : "not recorded");
  lines.emplace_back(kKhat, khat ? khat_reading(*khat) : "not recorded");
  for (const auto& [k, v] : facts)
    if (k != "method" && k != "iterations" && k != "converged" && k != "khat") lines.emplace_back(k, v);
  if (!settings.empty()) {
    std::string joined;
    for (const auto& [k, v] : settings) joined += (joined.empty() ? "" : ", ") + k + " = " + v;
    lines.emplace_back("settings", joined);
  }
  for (const auto& [k, v] : lines) {
    const size_t shown = k == kKhat ? 1 : k.size();  // three bytes, one column on the screen
    std::cout << "  " << k << std::string(shown < 12 ? 12 - shown : 1, ' ') << v << '\n';
  }
  std::cout << '\n' << fvi::program::format_summary(rows) << '\n' << fvi::program::kSummaryFootnote << '\n';
  return 0;
}

}  // namespace fvic::driver
