#pragma once
// The information-flow check (DESIGN.md §3): decides which party evaluates each term of the log
// joint and rejects any term through which one party's data or local latent would reach
// another. The rules, per term:
//
//   prior of a global        public data, server data, globals           -> the server
//   prior of a local         + silo data, locals                         -> each silo
//   prior of a split value   public data, the silo's own split values    -> silo k
//   likelihood of silo data  public data, silo data, globals, locals     -> each silo
//   likelihood of server /   public data, server data (if its own), globals, silo_sum(...)
//     public data              -> the server, or a coupling term when it uses silo_sum
//   silo_sum(operand)        operand: public data and one silo's split values only
//
// Split values anywhere but inside silo_sum or their own priors are an error.
#include <optional>

#include "frontend/semantic.h"

namespace fvic {

struct TermFacts {
  const Stmt* stmt = nullptr;
  TermKind kind = TermKind::Target;
  const Symbol* subject = nullptr;  // the left side's variable of a `~`
  std::string distribution;
  Taint lhs;   // taint of the left side (its indices included)
  Taint rhs;   // taint of everything else the term reads, enclosing loops and ifs included
  Taint context;  // what the conditions of the enclosing ifs read (part of rhs)
  bool uses_silo_sum = false;
  Loc loc;
};

// Decides the term's owner; reports violations and returns nullopt on one.
std::optional<Term> classify_term(const TermFacts& facts, Diagnostics& diags);

// Checks what a silo_sum operand reads; reports and returns false on a violation.
bool check_silo_sum_operand(const Expr& operand, Diagnostics& diags);

// The same for a generated quantity's silo_sum (a sum over horizontal silos of a per-silo scalar
// at each posterior draw): the operand reads a silo's data or locals, with public data and globals.
bool check_aggregate_operand(const Expr& operand, Diagnostics& diags);

}  // namespace fvic
