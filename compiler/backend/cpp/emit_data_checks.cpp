#include "backend/cpp/emit_data_checks.h"

#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpp/c_string.h"

namespace fvic::backend {

namespace {

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

const char* party_code(Owner o) {
  switch (o) {
    case Owner::Server: return "FVI_DATA_SERVER";
    case Owner::Silo: return "FVI_DATA_SILO";
    case Owner::Split: return "FVI_DATA_SPLIT";
    default: return "FVI_DATA_PUBLIC";
  }
}

}  // namespace

void emit_data_table(const SemanticModel& model, const std::array<std::string, 3>& transformed_data, std::ostream& o) {
  o << "// The data each party must give, checked before inference starts (fvi/data/validate.h).\n";
  std::vector<const Symbol*> data;
  for (const Symbol& s : model.symbols)
    if (s.kind == SymbolKind::Data && s.decl) data.push_back(&s);
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i]->shape.dims.empty()) continue;
    o << "const char* const kDataDims" << i << "[] = {";
    for (size_t k = 0; k < data[i]->shape.dims.size(); ++k)
      o << (k ? ", " : "") << c_string(size_text(data[i]->shape.dims[k]));
    o << "};\n";
  }
  if (!data.empty()) {
    o << "const fvi_data_declaration kDataDeclarations[] = {\n";
    for (size_t i = 0; i < data.size(); ++i) {
      const Symbol& s = *data[i];
      const TypeDecl& t = s.decl->type;
      const bool row_vector = s.type.base == Base::RowVector && s.type.array_dims == 0;
      o << "    {" << c_string(s.name) << ", " << party_code(s.owner) << ", " << (s.type.is_int_valued() ? 1 : 0)
        << ", " << (row_vector ? 1 : 0) << ", " << (t.simplex ? "FVI_SIMPLEX" : t.ordering == Ordering::Ordered ? "FVI_ORDERED_VECTOR" : t.ordering == Ordering::PositiveOrdered ? "FVI_POSITIVE_ORDERED_VECTOR" : "FVI_PLAIN") << ", " << s.shape.dims.size() << ", "
        << (s.shape.dims.empty() ? "nullptr" : "kDataDims" + std::to_string(i)) << ", "
        << c_string(bound_text(t.lower.get(), model)) << ", " << c_string(bound_text(t.upper.get(), model)) << ",\n"
        << "     " << c_string(declaration_text(*s.decl)) << ", " << s.decl->loc.line << "},\n";
    }
    o << "};\n";
  }
  std::vector<const SizeCheck*> checks;
  for (const SizeCheck& c : model.size_checks)
    if (!size_text(c.left).empty() && !size_text(c.right).empty()) checks.push_back(&c);
  if (!checks.empty()) {
    o << "const fvi_size_check kSizeChecks[] = {\n";
    for (const SizeCheck* c : checks)
      o << "    {" << c_string(size_text(c->left)) << ", " << c_string(size_text(c->right)) << ", " << c_string(c->what)
        << ", " << c->loc.line << "},\n";
    o << "};\n";
  }
  o << "const fvi_data_table kDataTable = {" << data.size() << ", " << (data.empty() ? "nullptr" : "kDataDeclarations")
    << ", " << checks.size() << ", " << (checks.empty() ? "nullptr" : "kSizeChecks") << ",\n    {";
  for (size_t p = 0; p < transformed_data.size(); ++p) o << (p ? ",\n     " : "") << c_string(transformed_data[p]);
  o << "}};\n\n";
}

}  // namespace fvic::backend
