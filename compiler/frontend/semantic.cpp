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
