#include "frontend/diagnostics.h"

#include <algorithm>
#include <ostream>

namespace fvic {

void Diagnostics::error(const Loc& loc, std::string message, std::string help) {
  diags_.push_back({Severity::Error, loc, std::move(message), std::move(help)});
  ++errors_;
}

void Diagnostics::warning(const Loc& loc, std::string message, std::string help) {
  diags_.push_back({Severity::Warning, loc, std::move(message), std::move(help)});
}

void Diagnostics::print(std::ostream& out) const {
  std::vector<Diagnostic> sorted = diags_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.col < b.loc.col;
  });
  sorted.erase(std::unique(sorted.begin(), sorted.end(),
                           [](const Diagnostic& a, const Diagnostic& b) {
                             return a.loc.line == b.loc.line && a.loc.col == b.loc.col &&
                                    a.message == b.message;
                           }),
               sorted.end());
  int warnings = 0;
  for (const Diagnostic& d : sorted) {
    if (d.severity == Severity::Warning) ++warnings;
    out << source_->name();
    if (d.loc.line > 0) out << ':' << d.loc.line << ':' << d.loc.col;
    out << ": "
        << (d.severity == Severity::Error ? "error: " : "warning: ") << d.message << '\n';
    std::string text = source_->line(d.loc.line);
    int col = d.loc.col;
    constexpr int kWindow = 60;  // long lines are shown around the caret only
    if (static_cast<int>(text.size()) > 2 * kWindow && col > kWindow) {
      int start = col - kWindow / 2;
      text = "..." + text.substr(start - 1);
      col = col - start + 4;
    }
    if (static_cast<int>(text.size()) > 2 * kWindow) text = text.substr(0, 2 * kWindow) + "...";
    if (d.loc.line > 0) {
      std::string number = std::to_string(d.loc.line);
      std::string gutter(number.size(), ' ');
      out << ' ' << number << " | " << text << '\n';
      std::string pad;
      for (int i = 1; i < col && static_cast<size_t>(i - 1) < text.size(); ++i)
        pad += text[i - 1] == '\t' ? '\t' : ' ';
      int width = std::max(1, std::min(d.loc.length, 2 * kWindow));
      out << ' ' << gutter << " | " << pad << '^' << std::string(width - 1, '~') << '\n';
    }
    if (!d.help.empty()) out << "  help: " << d.help << '\n';
  }
  int errors = static_cast<int>(
      std::count_if(sorted.begin(), sorted.end(),
                    [](const Diagnostic& d) { return d.severity == Severity::Error; }));
  if (errors > 0 || warnings > 0) {
    out << errors << (errors == 1 ? " error" : " errors");
    if (warnings > 0) out << ", " << warnings << (warnings == 1 ? " warning" : " warnings");
    out << " in " << source_->name() << '\n';
  }
}

}  // namespace fvic
