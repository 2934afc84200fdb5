#include "frontend/ownership.h"

#include <string>

namespace fvic {
namespace {

using K = TaintKind;

unsigned bit(K k) { return 1u << static_cast<unsigned>(k); }

// The first taint in `t` outside `allowed`, if any.
std::optional<K> first_outside(const Taint& t, unsigned allowed) {
  for (unsigned i = 0; i < static_cast<unsigned>(K::Count); ++i)
    if ((t.bits & (1u << i)) && !(allowed & (1u << i))) return static_cast<K>(i);
  return std::nullopt;
}

// Where `k` enters an expression: the leftmost variable (or silo_sum) whose value carries it.
// A silo_sum's value carries none of its operand's taint, so the search does not enter it.
const Expr* find_culprit(const Expr& e, K k) {
  if (e.kind == ExprKind::Var) return e.taint.has(k) ? &e : nullptr;
  if (e.kind == ExprKind::Call && e.name == "silo_sum") return k == K::SiloSum ? &e : nullptr;
  for (const ExprPtr& a : e.args)
    if (a)
      if (const Expr* c = find_culprit(*a, k)) return c;
  for (const Index& ix : e.indices)
    for (const ExprPtr* part : {&ix.lower, &ix.upper})
      if (*part)
        if (const Expr* c = find_culprit(**part, k)) return c;
  return nullptr;
}

// The culprit's use in a statement, or null when it enters through an enclosing condition.
const Expr* culprit_use(const Stmt* s, K k) {
  if (!s) return nullptr;
  if (s->lhs)
    if (const Expr* c = find_culprit(*s->lhs, k)) return c;
  for (const ExprPtr& a : s->args)
    if (a)
      if (const Expr* c = find_culprit(*a, k)) return c;
  return nullptr;
}

std::string culprit(const Taint& t, K k) {
  return std::string(taint_description(k)) + " '" + t.witness[static_cast<size_t>(k)] + "'";
}

const unsigned kPublic = bit(K::PublicData);
const unsigned kGlobals = bit(K::GlobalParam) | bit(K::GlobalHyper);
const unsigned kSplit = bit(K::SplitData) | bit(K::SplitParam) | bit(K::SplitHyper);

std::string why_not(K k, const char* where) {
  switch (k) {
    case K::SiloData:
      return std::string("a silo's data never leaves it, and ") + where +
             "; use public `data` here (e.g. a constant computed beforehand)";
    case K::LocalParam:
    case K::LocalHyper:
      return std::string("local parameters never leave their silo, and ") + where +
             "; a hierarchy goes the other way: a local's prior may use globals";
    case K::ServerData:
      return std::string("server data never leaves the server, and ") + where +
             "; move the value to public `data` if every silo may see it";
    case K::SplitData:
    case K::SplitParam:
    case K::SplitHyper:
      return "split values meet other silos' values only through silo_sum(...)";
    case K::SiloSum:
      return "silo_sum(...) belongs in a likelihood evaluated by the server";
    default:
      return where;
  }
}

}  // namespace

bool check_silo_sum_operand(const Expr& operand, Diagnostics& diags) {
  const Taint& t = operand.taint;
  unsigned allowed = kPublic | kSplit;
  if (auto bad = first_outside(t, allowed)) {
    const Expr* where = find_culprit(operand, *bad);
    Loc at = where ? where->loc : operand.loc;
    if (*bad == K::SiloSum) {
      diags.error(at, "silo_sum cannot be nested",
                  "each silo's contribution is summed once: write `silo_sum(...)` around the "
                  "per-silo expression only");
      return false;
    }
    std::string help;
    switch (*bad) {
      case K::GlobalParam:
      case K::GlobalHyper:
        help = "global values live on the server; move '" + t.witness[static_cast<size_t>(*bad)] +
               "' outside silo_sum, e.g. `b + silo_sum(x * beta)`";
        break;
      case K::ServerData:
        help = "the operand is computed by each silo, which cannot see server data";
        break;
      default:
        help = "silo_sum's operand is computed by each silo from its own split data and split "
               "parameters (and public data) only";
    }
    diags.error(at, "silo_sum reads " + culprit(t, *bad), help);
    return false;
  }
  if (!t.any_split()) {
    diags.error(operand.loc, "silo_sum's operand uses no split data or split parameter",
                "silo_sum adds up one contribution per silo; its operand should be computed "
                "from `split data` and `split` parameters, e.g. `silo_sum(x * beta)`");
    return false;
  }
  return true;
}

std::optional<Term> classify_term(const TermFacts& f, Diagnostics& diags) {
  Term term;
  term.stmt = f.stmt;
  term.kind = f.kind;
  term.distribution = f.distribution;
  term.uses_silo_sum = f.uses_silo_sum;
  term.loc = f.loc;
  term.taint = f.rhs;
  term.taint.merge(f.lhs);
  if (f.subject) term.subject = f.subject->name;

  // The caret goes under the culprit's use; when it comes from an enclosing `if`, the
  // statement is marked and the help names the condition.
  auto report = [&](K k, std::string message, std::string help) {
    const Expr* use = culprit_use(f.stmt, k);
    if (use && use->kind == ExprKind::Var && use->name != term.taint.witness[static_cast<size_t>(k)])
      message += " (through '" + use->name + "')";
    if (!use && f.context.has(k))
      help = "an enclosing `if` tests " + culprit(f.context, k) +
             ", so whether this term counts depends on it; " + help;
    diags.error(use ? use->loc : f.loc, message, help);
  };
  auto reject = [&](K k, const std::string& what, const char* where) {
    report(k, what + " uses " + culprit(term.taint, k), why_not(k, where));
    return std::nullopt;
  };

  const Taint& all = term.taint;
  if (f.kind == TermKind::Prior) {
    const Symbol& p = *f.subject;
    std::string what = "the prior of " + std::string(p.owner == Owner::Silo    ? "local"
                                                     : p.owner == Owner::Split ? "split"
                                                                               : "global") +
                       " " + (p.kind == SymbolKind::Hyperparameter ? "hyperparameter" : "parameter") +
                       " '" + p.name + "'";
    if (p.owner == Owner::Global) {
      unsigned allowed = kPublic | kGlobals | bit(K::ServerData);
      if (auto bad = first_outside(all, allowed))
        return reject(*bad, what, "a global prior is evaluated once, by the server");
      term.owner = TermOwner::Server;
    } else if (p.owner == Owner::Silo) {
      unsigned allowed = kPublic | kGlobals | bit(K::SiloData) | bit(K::LocalParam) | bit(K::LocalHyper);
      if (auto bad = first_outside(all, allowed))
        return reject(*bad, what, "a local prior is evaluated by each silo on its own");
      term.owner = TermOwner::Silo;
    } else {
      // A global parameter too: the server sends its draws with each adjoint, and takes back the
      // prior's gradient in them (vfl_exact; analysis/plan.cpp refuses the other methods).
      unsigned allowed = kPublic | kSplit | bit(K::GlobalParam);
      if (auto bad = first_outside(all, allowed)) {
        if (*bad == K::GlobalHyper) {
          report(*bad, what + " uses " + culprit(all, *bad),
                 "a split prior is evaluated by its silo, which vfl_exact sends the draws of global parameters "
                 "but not the server's point estimates: declare it a global parameter, or give the prior fixed "
                 "hyperparameters or split ones");
          return std::nullopt;
        }
        return reject(*bad, what, "a split prior is evaluated by its own silo");
      }
      term.owner = TermOwner::SplitSilo;
    }
    return term;
  }

  // A likelihood or `target +=`: the owner follows from the data it reads.
  std::string what = f.kind == TermKind::Likelihood
                         ? "the likelihood of '" + term.subject + "'"
                         : std::string("this target term");
  bool silo = all.has(K::SiloData) || all.has(K::LocalParam) || all.has(K::LocalHyper);
  bool split_outside = (f.lhs.any_split() || f.rhs.any_split());
  if (split_outside) {
    // Split values outside silo_sum: only a split silo's own likelihood of its own columns.
    if (!f.lhs.any_split() && f.kind == TermKind::Likelihood) {
      // A split value's own kind first: a split parameter sized by split data also carries that.
      K k = f.rhs.has(K::SplitParam) ? K::SplitParam : f.rhs.has(K::SplitHyper) ? K::SplitHyper : K::SplitData;
      report(k, what + " uses " + culprit(all, k) + " outside silo_sum",
             "wrap each silo's contribution in silo_sum(...), e.g. "
             "`y ~ bernoulli_logit(b + silo_sum(x * beta))`");
      return std::nullopt;
    }
    unsigned allowed = kPublic | kSplit;
    if (auto bad = first_outside(all, allowed))
      return reject(*bad, what, "it would need split values from one silo and other values");
    term.owner = TermOwner::SplitSilo;
    return term;
  }
  if (silo) {
    unsigned allowed = kPublic | kGlobals | bit(K::SiloData) | bit(K::LocalParam) | bit(K::LocalHyper);
    if (auto bad = first_outside(all, allowed))
      return reject(*bad, what, "a term over silo data is evaluated by that silo");
    term.owner = TermOwner::Silo;
    return term;
  }
  unsigned allowed = kPublic | kGlobals | bit(K::ServerData) | bit(K::SiloSum);
  if (auto bad = first_outside(all, allowed)) return reject(*bad, what, "it is evaluated by the server");
  term.owner = f.uses_silo_sum ? TermOwner::Coupling : TermOwner::Server;
  return term;
}

bool check_aggregate_operand(const Expr& operand, Diagnostics& diags) {
  const Taint& t = operand.taint;
  const unsigned silo = bit(K::SiloData) | bit(K::LocalParam) | bit(K::LocalHyper);
  if (auto bad = first_outside(t, kPublic | kGlobals | silo)) {
    const Expr* where = find_culprit(operand, *bad);
    Loc at = where ? where->loc : operand.loc;
    if (*bad == K::SiloSum) {
      diags.error(at, "silo_sum cannot be nested", "each silo's part is summed once: write one `silo_sum(...)`");
      return false;
    }
    const bool split = *bad == K::SplitData || *bad == K::SplitParam || *bad == K::SplitHyper;
    diags.error(at, "silo_sum in generated quantities reads " + culprit(t, *bad),
                split ? std::string("a sum over the silos of a vertically split model is not supported in "
                                    "generated quantities yet")
                      : std::string("each silo computes the operand from its own data and locals, the globals' "
                                    "draws and public data; it cannot see server data"));
    return false;
  }
  if (!(t.bits & silo)) {
    diags.error(operand.loc, "silo_sum's operand reads no silo data or local parameter",
                "a sum over the silos adds up each silo's part of a value; a value of public data and globals "
                "alone is the server's: write it without silo_sum");
    return false;
  }
  if (!operand.type.is_error() && !operand.type.is_scalar()) {
    diags.error(operand.loc, "silo_sum in generated quantities sums a scalar, not " + to_string(operand.type),
                "each silo sends one number per draw: reduce its part first, e.g. `silo_sum(sum(log_lik))`");
    return false;
  }
  return true;
}

}  // namespace fvic
