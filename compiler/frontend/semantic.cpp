// The semantic model's (semantic.h) out-of-line parts: the names of owners and of terms, and
// the lookup of symbols by name and by kind.
#include "frontend/semantic.h"

namespace fvic {

const char* owner_name(Owner owner) {
  switch (owner) {
    case Owner::Public: return "public";
    case Owner::Server: return "server";
    case Owner::Silo: return "silo";
    case Owner::Split: return "split";
    case Owner::Global: return "global";
    case Owner::Scope: return "scope";
  }
  return "?";
}

const char* term_kind_name(TermKind kind) {
  switch (kind) {
    case TermKind::Prior: return "prior";
    case TermKind::Likelihood: return "likelihood";
    case TermKind::Target: return "target";
  }
  return "?";
}

const char* term_owner_name(TermOwner owner) {
  switch (owner) {
    case TermOwner::Server: return "server";
    case TermOwner::Silo: return "silo";
    case TermOwner::SplitSilo: return "split silo";
    case TermOwner::Coupling: return "coupling";
  }
  return "?";
}

const Symbol* SemanticModel::find(const std::string& name) const {
  if (indexed_ > symbols.size()) index_.clear(), indexed_ = 0;  // the vector was cut: index afresh
  for (; indexed_ < symbols.size(); ++indexed_) index_.emplace(symbols[indexed_].name, indexed_);  // the first wins
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &symbols[it->second];
}

std::vector<const Symbol*> SemanticModel::of(SymbolKind kind) const {
  std::vector<const Symbol*> out;
  for (const Symbol& s : symbols)
    if (s.kind == kind) out.push_back(&s);
  return out;
}

}  // namespace fvic

namespace fvic {

// Recursion is bounded: expressions by the parser's nesting limit, aliases by declaration order
// (an alias names only earlier declarations).
std::optional<SymSize> size_value(const Expr& e, const SemanticModel& model) {
  if (e.kind == ExprKind::IntLit) return SymSize::constant(e.int_value);
  if (e.kind == ExprKind::Var) {
    const Symbol* s = model.find(e.name);
    if (!s || !s->type.is_int() || s->type.array_dims != 0) return std::nullopt;
    if (s->kind == SymbolKind::Data) return SymSize::atom(e.name);
    if (s->kind != SymbolKind::Transformed || s->block != BlockKind::TransformedData || !s->value || s->loop)
      return std::nullopt;
    return size_value(*s->value, model);
  }
  if (e.kind == ExprKind::Binary && (e.name == "+" || e.name == "-" || e.name == "*")) {
    auto a = size_value(*e.args[0], model), b = size_value(*e.args[1], model);
    if (!a || !b) return std::nullopt;
    return e.name == "+" ? *a + *b : e.name == "-" ? *a - *b : *a * *b;
  }
  if (e.kind == ExprKind::Unary && e.name == "-") {
    auto a = size_value(*e.args[0], model);
    if (!a) return std::nullopt;
    return SymSize::constant(0) - *a;
  }
  if (e.kind == ExprKind::Call && e.args.size() == 1 &&
      (e.name == "num_elements" || e.name == "size" || e.name == "rows" || e.name == "cols")) {
    // A container's size from its declared shape (array dims, then the vector's or matrix's).
    const Expr& x = *e.args[0];
    const std::vector<SymSize>& d = x.shape.dims;
    if (d.empty() || x.type.is_error()) return std::nullopt;
    const bool row_vector = x.type.array_dims == 0 && x.type.base == Base::RowVector;
    if (e.name == "size") return d[0];
    if (e.name == "num_elements") {
      SymSize n = SymSize::constant(1);
      for (const SymSize& k : d) n = n * k;
      return n;
    }
    if (x.type.array_dims != 0) return std::nullopt;
    if (e.name == "rows") return row_vector ? SymSize::constant(1) : d[0];
    return row_vector ? d[0] : d.size() > 1 ? d[1] : SymSize::constant(1);
  }
  return std::nullopt;
}

bool computed_at_load(const Symbol& s) {
  return s.kind == SymbolKind::Transformed && s.block == BlockKind::TransformedData &&
         (!s.value || s.loop || s.value_at_load);
}

}  // namespace fvic
