#include "backend/abi_description.h"

#include <cctype>
#include <sstream>

namespace fvic::backend {

fvi_owner owner_code(TermOwner owner) {
  switch (owner) {
    case TermOwner::Server: return FVI_SERVER;
    case TermOwner::Silo: return FVI_SILO;
    case TermOwner::SplitSilo: return FVI_SPLIT_SILO;
    case TermOwner::Coupling: return FVI_COUPLING;
  }
  return FVI_SERVER;
}

fvi_factor_kind kind_code(ir::FactorKind kind) {
  switch (kind) {
    case ir::FactorKind::Density: return FVI_DENSITY;
    case ir::FactorKind::Likelihood: return FVI_LIKELIHOOD;
    case ir::FactorKind::Contribution: return FVI_CONTRIBUTION;
    case ir::FactorKind::Elements: return FVI_ELEMENTS;
    case ir::FactorKind::Quantity: break;  // quantities are not factors: their own table
  }
  return FVI_DENSITY;
}

int group_index(const ir::Module& module, fvi_group kind) {
  for (size_t g = 0; g < module.groups.size(); ++g)
    if (module.groups[g].kind == kind) return int(g);
  return -1;
}

namespace {

BoundDescription bound(const Expr* e) {
  BoundDescription b;
  if (!e) return b;
  const Expr* x = e;
  bool negate = false;
  if (x->kind == ExprKind::Unary && x->name == "-" && !x->args.empty()) negate = true, x = x->args[0].get();
  if (x->kind == ExprKind::IntLit) b.literal = (negate ? -1 : 1) * double(x->int_value);
  else if (x->kind == ExprKind::RealLit) b.literal = (negate ? -1 : 1) * x->real_value;
  else if (x->kind == ExprKind::Var && !negate) b.data = x->name;
  else b.data = "(expression)";
  return b;
}

// The transform of a parameter's declared type (abi.h enum fvi_transform).
fvi_transform variable_transform(const TypeDecl* t) {
  if (!t) return FVI_IDENTITY;
  if (t->affine()) return FVI_AFFINE;
  switch (t->structure) {
    case MatrixStructure::Corr: return FVI_CORR_MATRIX;
    case MatrixStructure::Cov: return FVI_COV_MATRIX;
    case MatrixStructure::CholeskyCov: return FVI_CHOLESKY_COV;
    case MatrixStructure::UnitVector: return FVI_UNIT_VECTOR;
    case MatrixStructure::CholeskyCorr: return FVI_CHOLESKY_CORR;
    case MatrixStructure::None: break;
  }
  if (t->simplex) return FVI_SOFTMAX_SIMPLEX;
  if (t->ordering == Ordering::Ordered) return FVI_ORDERED;
  if (t->ordering == Ordering::PositiveOrdered) return FVI_POSITIVE_ORDERED;
  if (t->lower && t->upper) return FVI_INTERVAL;
  if (t->lower) return FVI_LOWER;
  if (t->upper) return FVI_UPPER;
  return FVI_IDENTITY;
}

// A derived value's transform: its bounds, or the structure it is checked to have at each draw
// (a cholesky_factor_corr parameter's factor is one by construction).
fvi_transform quantity_transform(const Symbol& s) {
  const TypeDecl& t = s.decl->type;
  if (s.kind == SymbolKind::Transformed) {
    switch (t.structure) {
      case MatrixStructure::CholeskyCorr: return FVI_CHOLESKY_CORR;
      case MatrixStructure::CholeskyCov: return FVI_CHOLESKY_COV;
      case MatrixStructure::Corr: return FVI_CORR_MATRIX;
      case MatrixStructure::Cov: return FVI_COV_MATRIX;
      case MatrixStructure::UnitVector: return FVI_UNIT_VECTOR;
      case MatrixStructure::None: break;
    }
  }
  return t.lower && t.upper ? FVI_INTERVAL : t.lower ? FVI_LOWER : t.upper ? FVI_UPPER : FVI_IDENTITY;
}

bool identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// A symbolic size as the runtime's expression syntax ("2*D + 1", "(D*D + D)/2"), or "".
std::string size_text(const SymSize& s) {
  if (s.is_unknown()) return "";
  for (const std::string& a : s.atoms())
    if (!identifier(a)) return "";
  return s.str();
}

// Whether the runtime can evaluate `e`: numbers, data scalars, unary +/-, binary + - * /.
bool evaluable(const Expr& e, const SemanticModel& model) {
  switch (e.kind) {
    case ExprKind::IntLit:
    case ExprKind::RealLit: return true;
    case ExprKind::Var: {
      const Symbol* s = model.find(e.name);
      return s && s->kind == SymbolKind::Data && s->type.is_scalar();
    }
    case ExprKind::Unary: return (e.name == "-" || e.name == "+") && evaluable(*e.args[0], model);
    case ExprKind::Binary:
      return (e.name == "+" || e.name == "-" || e.name == "*" || e.name == "/") && evaluable(*e.args[0], model) &&
             evaluable(*e.args[1], model);
    default: return false;
  }
}

std::string bound_text(const Expr* e, const SemanticModel& model) {
  return e && evaluable(*e, model) ? to_source(*e) : "";
}

// "array[N] int<lower=0, upper=1> y", as the user wrote it.
std::string declaration_text(const VarDecl& d) {
  const TypeDecl& t = d.type;
  std::ostringstream s;
  auto list = [&](const std::vector<ExprPtr>& xs) {
    for (size_t i = 0; i < xs.size(); ++i) s << (i ? ", " : "") << to_source(*xs[i]);
  };
  if (!t.array_sizes.empty()) {
    s << "array[";
    list(t.array_sizes);
    s << "] ";
  }
  s << (t.simplex                                 ? std::string("simplex")
        : t.ordering == Ordering::Ordered         ? std::string("ordered")
        : t.ordering == Ordering::PositiveOrdered ? std::string("positive_ordered")
                                                  : to_string(Type{t.base, 0}));
  if (t.lower || t.upper) {
    s << '<';
    if (t.lower) s << "lower=" << to_source(*t.lower);
    if (t.upper) s << (t.lower ? ", " : "") << "upper=" << to_source(*t.upper);
    s << '>';
  }
  if (!t.sizes.empty()) {
    s << '[';
    list(t.sizes);
    s << ']';
  }
  s << ' ' << d.name;
  return s.str();
}

fvi_data_party party_code(Owner o) {
  switch (o) {
    case Owner::Server: return FVI_DATA_SERVER;
    case Owner::Silo: return FVI_DATA_SILO;
    case Owner::Split: return FVI_DATA_SPLIT;
    default: return FVI_DATA_PUBLIC;
  }
}

}  // namespace

std::vector<VariableDescription> describe_variables(const ir::Module& module, const SemanticModel& model) {
  std::vector<std::pair<int, const ir::Slot*>> slots;
  for (size_t g = 0; g < module.groups.size(); ++g)
    for (const ir::Slot& slot : module.groups[g].slots) slots.push_back({int(g), &slot});
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].second->variable == name) return int(i);
    return -1;
  };
  std::vector<VariableDescription> out;
  for (const auto& [g, slot] : slots) {
    const Symbol* s = model.find(slot->variable);
    const TypeDecl* t = s && s->decl ? &s->decl->type : nullptr;
    const bool structured = t && t->structure != MatrixStructure::None;
    VariableDescription v;
    v.name = slot->variable;
    v.group = g;
    v.transform = variable_transform(t);
    v.lower = bound(t ? t->lower.get() : nullptr);
    v.upper = bound(t ? t->upper.get() : nullptr);
    v.rank = structured ? 1 : s ? int(s->shape.dims.size()) : 0;
    v.prior_scale = slot->prior_scale.empty() ? -1 : index_of(slot->prior_scale);
    v.class_shift = slot->class_shift;
    for (size_t i = 0; i < slot->centring.size(); ++i) {
      const auto& [data, coefficient] = slot->centring[i];
      const int index = coefficient.empty() ? -1 : index_of(coefficient);
      if (i == 0) v.centring_data = data, v.centring_coefficient = index;
      else v.centring_more_data.push_back(data), v.centring_more_coefficients.push_back(index);
    }
    v.centring_group = slot->centring_group;
    v.offset = slot->offset;
    if (structured) v.dims.push_back(slot->size);  // its unconstrained values; the matrix is a quantity
    else if (s) v.dims = s->shape.dims;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<QuantityDescription> describe_quantities(const ir::Module& module, const SemanticModel& model) {
  std::vector<QuantityDescription> out;
  for (size_t i = 0; i < module.quantities.size(); ++i) {
    const ir::Factor& q = module.quantities[i];
    const Symbol* s = model.find(q.variable);
    QuantityDescription d;
    d.name = q.variable;
    d.block = s->block == BlockKind::GeneratedQuantities ? FVI_GENERATED_QUANTITIES : FVI_TRANSFORMED_PARAMETERS;
    d.owner = owner_code(q.owner);
    d.factor = int(module.factors.size() + i);
    for (fvi_group g : q.groups) d.groups.push_back(group_index(module, g));
    d.rank = int(s->shape.dims.size());
    d.transform = quantity_transform(*s);
    d.lower = bound(s->decl->type.lower.get());
    d.upper = bound(s->decl->type.upper.get());
    d.aggregate = q.aggregate;
    out.push_back(std::move(d));
  }
  return out;
}

DataTableDescription describe_data(const SemanticModel& model, const std::array<std::string, 3>& transformed_data) {
  DataTableDescription out;
  for (const Symbol& s : model.symbols) {
    if (s.kind != SymbolKind::Data || !s.decl) continue;
    const TypeDecl& t = s.decl->type;
    DataDescription d;
    d.name = s.name;
    d.party = party_code(s.owner);
    d.is_int = s.type.is_int_valued();
    d.row_vector = s.type.base == Base::RowVector && s.type.array_dims == 0;
    d.structure = t.simplex                                   ? FVI_SIMPLEX
                  : t.ordering == Ordering::Ordered         ? FVI_ORDERED_VECTOR
                  : t.ordering == Ordering::PositiveOrdered ? FVI_POSITIVE_ORDERED_VECTOR
                                                            : FVI_PLAIN;
    for (const SymSize& dim : s.shape.dims) d.dims.push_back(size_text(dim));
    d.lower = bound_text(t.lower.get(), model);
    d.upper = bound_text(t.upper.get(), model);
    d.declaration = declaration_text(*s.decl);
    d.line = s.decl->loc.line;
    out.declarations.push_back(std::move(d));
  }
  for (const SizeCheck& c : model.size_checks)
    if (!size_text(c.left).empty() && !size_text(c.right).empty())
      out.size_checks.push_back({size_text(c.left), size_text(c.right), c.what, c.loc.line});
  out.transformed_data = transformed_data;
  return out;
}

}  // namespace fvic::backend
