#include "analysis/transformed_data.h"

#include <cstdio>
#include <set>
#include <vector>

#include "fvi/data/transformed_data.h"
#include "fvi/kernel/abi.h"

namespace fvic {

namespace {

// Writes statements and expressions of `transformed data` in the program's form, recording the
// program-level names each reads and writes.
class ProgramWriter {
 public:
  ProgramWriter(const SemanticModel& m, Diagnostics& diags) : m_(m), diags_(diags) {}

  bool ok() const { return ok_; }
  const std::string& bounds() const { return bounds_; }
  std::set<std::string> reads, writes;

  std::string statement(const Stmt& s, bool top) {
    const std::string line = std::to_string(s.loc.line);
    switch (s.kind) {
      case StmtKind::Decl: return declaration(*s.decl, top);
      case StmtKind::Assign: {
        const Expr* base = s.lhs.get();
        if (base->kind == ExprKind::Index) base = base->args[0].get();
        if (base->kind != ExprKind::Var) {
          refuse(s.lhs->loc, "an assignment to '" + to_source(*s.lhs) + "'");
          return "";
        }
        writes.insert(base->name);
        return "(assign " + line + " " + s.name + " " + expr(*s.lhs) + " " + expr(*s.args[0]) + ")";
      }
      case StmtKind::For:
        return "(for " + line + " " + s.name + " " + expr(*s.args[0]) + " " + expr(*s.args[1]) + " " +
               statement(*s.body[0], false) + ")";
      case StmtKind::If: {
        std::string out = "(if " + line + " " + expr(*s.args[0]) + " " + statement(*s.body[0], false);
        if (s.body.size() > 1) out += " " + statement(*s.body[1], false);
        return out + ")";
      }
      case StmtKind::Block: {
        std::string out = "(block";
        for (const StmtPtr& b : s.body) out += " " + statement(*b, false);
        return out + ")";
      }
      case StmtKind::Empty: return "(block)";
      default: refuse(s.loc, "this statement"); return "";
    }
  }

  std::string declaration(const VarDecl& d, bool exported) {
    const TypeDecl& t = d.type;
    const char* base = t.base == Base::Vector ? "v" : t.base == Base::RowVector ? "r" : t.base == Base::Matrix ? "m" : "s";
    if (t.base != Base::Real && t.base != Base::Int && t.base != Base::Vector && t.base != Base::RowVector &&
        t.base != Base::Matrix) {
      refuse(d.loc, "a declaration of this type");
      return "";
    }
    if (exported && (t.lower || t.upper))  // checked once the statements have run
      bounds_ += " (bounds " + std::to_string(d.loc.line) + " " + d.name + " " + (t.lower ? expr(*t.lower) : "_") + " " +
                 (t.upper ? expr(*t.upper) : "_") + ")";
    std::string out = "(decl " + std::to_string(d.loc.line) + " " + d.name + " " + (t.base == Base::Int ? "int" : "real") +
                      " " + base + " " + std::to_string(t.array_sizes.size()) + " " + (exported ? "1" : "0") + " (";
    bool first = true;
    for (const auto* sizes : {&t.array_sizes, &t.sizes})
      for (const ExprPtr& size : *sizes) {
        out += (first ? "" : " ") + expr(*size);
        first = false;
      }
    out += ")";
    if (d.init) out += " " + expr(*d.init);
    return out + ")";
  }

  std::string expr(const Expr& e) {
    if (e.inlined) return expr(*e.inlined);
    switch (e.kind) {
      case ExprKind::IntLit: return "(int " + std::to_string(e.int_value) + ")";
      case ExprKind::RealLit: {
        char text[40];
        std::snprintf(text, sizeof text, "%.17g", e.real_value);
        return std::string("(real ") + text + ")";
      }
      case ExprKind::Var:
        if (const Symbol* s = m_.find(e.name); s && (s->kind == SymbolKind::Data || s->kind == SymbolKind::Transformed))
          reads.insert(e.name);
        return "(var " + e.name + ")";
      case ExprKind::Unary: return "(unary " + e.name + " " + expr(*e.args[0]) + ")";
      case ExprKind::Binary: return "(bin " + e.name + " " + expr(*e.args[0]) + " " + expr(*e.args[1]) + ")";
      case ExprKind::Cond: return "(cond " + expr(*e.args[0]) + " " + expr(*e.args[1]) + " " + expr(*e.args[2]) + ")";
      case ExprKind::Call: {
        if (!fvi::data::transformed_data_function(e.name)) {
          refuse(e.loc, "the function '" + e.name + "'");
          return "";
        }
        std::string out = "(call " + e.name;
        for (const ExprPtr& a : e.args) out += " " + expr(*a);
        return out + ")";
      }
      case ExprKind::Index: {
        std::string out = "(index " + expr(*e.args[0]);
        for (const Index& ix : e.indices) {
          if (ix.kind == IndexKind::All) out += " (all)";
          else if (ix.kind == IndexKind::Single) out += " (at " + expr(*ix.lower) + ")";
          else out += " (range " + (ix.lower ? expr(*ix.lower) : "_") + " " + (ix.upper ? expr(*ix.upper) : "_") + ")";
        }
        return out + ")";
      }
      case ExprKind::ArrayLit:
      case ExprKind::RowVectorLit: {
        std::string out = e.kind == ExprKind::ArrayLit ? "(array" : "(rowvec";
        for (const ExprPtr& a : e.args) out += " " + expr(*a);
        return out + ")";
      }
      default: refuse(e.loc, "this expression"); return "";
    }
  }

 private:
  void refuse(const Loc& at, const std::string& what) {
    if (ok_)
      diags_.error(at, what + " in transformed data built by statements is not supported yet",
                   "these statements run when the data is read; they may use loops, ifs, assignments of elements "
                   "and slices, arithmetic, comparisons and the functions listed in the language reference");
    ok_ = false;
  }

  const SemanticModel& m_;
  Diagnostics& diags_;
  bool ok_ = true;
  std::string bounds_;  // the declared bounds' checks, run after every statement
};

// The party that may run a statement reading and writing `names`: fvi_data_party, or -1 (split).
int party_of(const SemanticModel& m, const std::set<std::string>& names) {
  int party = FVI_DATA_PUBLIC;
  for (const std::string& n : names) {
    const Symbol* s = m.find(n);
    if (!s) continue;
    if (s->owner == Owner::Split) return -1;
    if (s->owner == Owner::Silo) party = FVI_DATA_SILO;
    else if (s->owner == Owner::Server && party == FVI_DATA_PUBLIC) party = FVI_DATA_SERVER;
  }
  return party;
}

const char* base_code(const Symbol& s) {
  switch (s.type.base) {
    case Base::Vector: return "v";
    case Base::RowVector: return "r";
    case Base::Matrix: return "m";
    default: return "s";
  }
}

}  // namespace

bool computable_at_load(const SemanticModel& model, const VarDecl& d) {
  Diagnostics quiet(nullptr);
  ProgramWriter trial(model, quiet);
  trial.declaration(d, true);
  for (const std::string& r : trial.reads)
    if (const Symbol* s = model.find(r); s && s->kind == SymbolKind::Transformed && !computed_at_load(*s)) return false;
  return trial.ok();
}

bool transformed_data_programs(const SemanticModel& model, std::array<std::string, 3>& programs, Diagnostics& diags) {
  programs = {"", "", ""};
  const Block* block = model.program->find(BlockKind::TransformedData);
  if (!block) return true;
  std::set<std::string> needed;
  for (const Symbol& s : model.symbols)
    if (computed_at_load(s)) needed.insert(s.name);
  if (needed.empty()) return true;

  // Each top-level statement written out, with what it reads and writes.
  struct Item {
    const Stmt* stmt;
    std::string text, bounds;
    std::set<std::string> reads, writes;
  };
  std::vector<Item> items;
  bool ok = true;
  for (const StmtPtr& s : block->stmts) {
    Item item{s.get(), "", "", {}, {}};
    Diagnostics quiet(nullptr);  // refusals of statements not needed are not reported
    ProgramWriter trial(model, quiet);
    item.text = trial.statement(*s, true);
    item.bounds = trial.bounds();
    item.reads = trial.reads;
    item.writes = trial.writes;
    if (s->kind == StmtKind::Decl) item.writes.insert(s->decl->name);
    if (!trial.ok()) item.text.clear();
    items.push_back(item);
  }
  // The statements the load-time declarations need, through what those statements read.
  std::vector<bool> used(items.size(), false);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < items.size(); ++i) {
      if (used[i]) continue;
      bool writes_needed = false;
      for (const std::string& w : items[i].writes) writes_needed |= needed.count(w) > 0;
      if (!writes_needed) continue;
      used[i] = grew = true;
      for (const std::string& r : items[i].reads)
        if (const Symbol* s = model.find(r); s && s->kind == SymbolKind::Transformed) needed.insert(r);
    }
  }
  std::array<std::set<std::string>, 3> declared, read;
  std::array<std::string, 3> body, bounds;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!used[i]) continue;
    const Item& item = items[i];
    if (item.text.empty()) {  // report why, now that it is needed
      ProgramWriter loud(model, diags);
      loud.statement(*item.stmt, true);
      ok = false;
      continue;
    }
    std::set<std::string> names = item.reads;
    names.insert(item.writes.begin(), item.writes.end());
    const int party = party_of(model, names);
    if (party < 0) {
      diags.error(item.stmt->loc, "transformed data built by statements from split data is not supported yet",
                  "compute it from public or silo data, or give it its value in one declaration");
      ok = false;
      continue;
    }
    body[party] += " " + item.text;
    bounds[party] += item.bounds;
    declared[party].insert(item.writes.begin(), item.writes.end());
    read[party].insert(item.reads.begin(), item.reads.end());
  }
  if (!ok) return false;
  for (int p = 0; p < 3; ++p) {
    if (body[p].empty()) continue;
    std::string inputs;
    for (const std::string& r : read[p]) {
      if (declared[p].count(r)) continue;
      const Symbol& s = *model.find(r);
      inputs += " (input " + r + " " + (s.type.is_int_valued() ? "int" : "real") + " " + base_code(s) + " " +
                std::to_string(s.type.array_dims) + ")";
    }
    programs[static_cast<size_t>(p)] = "(program" + inputs + body[p] + bounds[p] + ")";
  }
  return true;
}

}  // namespace fvic
