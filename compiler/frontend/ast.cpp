#include "frontend/ast.h"

#include <sstream>

namespace fvic {

const char* structure_name(MatrixStructure s) {
  switch (s) {
    case MatrixStructure::CholeskyCorr: return "cholesky_factor_corr";
    case MatrixStructure::CholeskyCov: return "cholesky_factor_cov";
    case MatrixStructure::Corr: return "corr_matrix";
    case MatrixStructure::Cov: return "cov_matrix";
    case MatrixStructure::UnitVector: return "unit_vector";
    case MatrixStructure::None: break;
  }
  return "matrix";
}

const char* block_name(BlockKind kind) {
  switch (kind) {
    case BlockKind::Functions: return "functions";
    case BlockKind::Data: return "data";
    case BlockKind::ServerData: return "server data";
    case BlockKind::SiloData: return "silo data";
    case BlockKind::SplitData: return "split data";
    case BlockKind::TransformedData: return "transformed data";
    case BlockKind::Hyperparameters: return "hyperparameters";
    case BlockKind::Parameters: return "parameters";
    case BlockKind::TransformedParameters: return "transformed parameters";
    case BlockKind::Model: return "model";
    case BlockKind::GeneratedQuantities: return "generated quantities";
    case BlockKind::Inference: return "inference";
  }
  return "?";
}

const char* mark_name(Mark mark) {
  switch (mark) {
    case Mark::None: return "";
    case Mark::Global: return "global";
    case Mark::Local: return "local";
    case Mark::Split: return "split";
  }
  return "?";
}

const Block* Program::find(BlockKind kind) const {
  for (const Block& b : blocks)
    if (b.kind == kind) return &b;
  return nullptr;
}

Block* Program::find(BlockKind kind) {
  for (Block& b : blocks)
    if (b.kind == kind) return &b;
  return nullptr;
}

namespace {

// Binding strength for printing with the fewest parentheses that keep the meaning.
int binary_precedence(const std::string& op) {
  if (op == "||") return 2;
  if (op == "&&") return 3;
  if (op == "==" || op == "!=") return 4;
  if (op == "<" || op == "<=" || op == ">" || op == ">=") return 5;
  if (op == "+" || op == "-") return 6;
  if (op == "^" || op == ".^") return 9;
  return 7;  // * / % .* ./ \ (unary sits at 8)
}

int strength(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Cond: return 1;
    case ExprKind::Binary: return binary_precedence(e.name);
    case ExprKind::Unary: return 8;
    default: return 10;
  }
}

void print(std::ostream& out, const Expr& e);

void print_operand(std::ostream& out, const Expr& e, int min_strength) {
  if (strength(e) < min_strength) {
    out << '(';
    print(out, e);
    out << ')';
  } else {
    print(out, e);
  }
}

void print_list(std::ostream& out, const std::vector<ExprPtr>& args, size_t from = 0) {
  for (size_t i = from; i < args.size(); ++i) {
    if (i > from) out << ", ";
    print(out, *args[i]);
  }
}

void print(std::ostream& out, const Expr& e) {
  switch (e.kind) {
    case ExprKind::IntLit:
    case ExprKind::RealLit: out << e.text; break;
    case ExprKind::Var: out << e.name; break;
    case ExprKind::Unary:
      out << e.name;
      print_operand(out, *e.args[0], 8);
      break;
    case ExprKind::Binary: {
      int p = binary_precedence(e.name);
      bool right_assoc = e.name == "^" || e.name == ".^";
      print_operand(out, *e.args[0], right_assoc ? p + 1 : p);
      out << ' ' << e.name << ' ';
      print_operand(out, *e.args[1], right_assoc ? p : p + 1);
      break;
    }
    case ExprKind::Cond:
      print_operand(out, *e.args[0], 2);
      out << " ? ";
      print_operand(out, *e.args[1], 2);
      out << " : ";
      print(out, *e.args[2]);
      break;
    case ExprKind::Call:
      out << e.name << '(';
      if (!e.text.empty()) out << e.text << (e.args.empty() ? "" : ", ");  // an ODE solver's system
      print_list(out, e.args);
      out << ')';
      break;
    case ExprKind::CondCall:
      out << e.name << '(';
      print(out, *e.args[0]);
      out << " | ";
      print_list(out, e.args, 1);
      out << ')';
      break;
    case ExprKind::Index:
      print_operand(out, *e.args[0], 10);
      out << '[';
      for (size_t i = 0; i < e.indices.size(); ++i) {
        const Index& ix = e.indices[i];
        if (i) out << ", ";
        if (ix.lower) print(out, *ix.lower);
        if (ix.kind != IndexKind::Single) out << ':';
        if (ix.upper) print(out, *ix.upper);
      }
      out << ']';
      break;
    case ExprKind::Transpose:
      print_operand(out, *e.args[0], 10);
      out << '\'';
      break;
    case ExprKind::ArrayLit:
      out << '{';
      print_list(out, e.args);
      out << '}';
      break;
    case ExprKind::RowVectorLit:
      out << '[';
      print_list(out, e.args);
      out << ']';
      break;
  }
}

class AstDumper {
 public:
  std::string run(const Program& p) {
    line(0, "program " + p.name);
    for (const Block& b : p.blocks) block(b);
    return out_.str();
  }

 private:
  void line(int depth, const std::string& text) {
    out_ << std::string(2 * depth, ' ') << text << '\n';
  }

  void block(const Block& b) {
    line(1, std::string("block ") + block_name(b.kind) + "  @" + std::to_string(b.loc.line));
    for (const FunctionDef& f : b.functions) {
      std::string args;
      for (const FunctionArg& a : f.args)
        args += (args.empty() ? "" : ", ") + std::string(a.data_only ? "data " : "") + to_string(a.type) + " " + a.name;
      line(2, "function " + (f.returns_void ? std::string("void") : to_string(f.return_type)) + " " + f.name + "(" +
                  args + ")");
      if (f.body) stmt(3, *f.body);
    }
    for (const VarDeclPtr& d : b.decls) decl(2, *d);
    for (const StmtPtr& s : b.stmts) stmt(2, *s);
    for (const Setting& s : b.settings) line(2, "setting " + s.key + " = " + s.value.str());
  }

  std::string type(const TypeDecl& t) {
    std::ostringstream s;
    if (!t.array_sizes.empty()) {
      s << "array[";
      print_list(s, t.array_sizes);
      s << "] ";
    }
    if (t.structure != MatrixStructure::None) s << structure_name(t.structure);
    else if (t.simplex) s << "simplex";
    else if (t.ordering == Ordering::Ordered) s << "ordered";
    else if (t.ordering == Ordering::PositiveOrdered) s << "positive_ordered";
    else s << to_string(Type{t.base, 0});
    if (t.lower || t.upper || t.affine()) {
      s << '<';
      bool first = true;
      for (const auto& [name, e] : {std::pair<const char*, const ExprPtr*>{"lower", &t.lower}, {"upper", &t.upper},
                                    {"offset", &t.offset}, {"multiplier", &t.multiplier}}) {
        if (!*e) continue;
        s << (first ? "" : ", ") << name << '=';
        print(s, **e);
        first = false;
      }
      s << '>';
    }
    if (!t.sizes.empty()) {
      s << '[';
      print_list(s, t.sizes);
      s << ']';
    }
    return s.str();
  }

  void decl(int depth, const VarDecl& d) {
    std::string text = "decl ";
    if (d.mark != Mark::None) text += std::string(mark_name(d.mark)) + " ";
    text += type(d.type) + " " + d.name;
    if (d.init) text += " = " + to_source(*d.init);
    line(depth, text + "  @" + std::to_string(d.loc.line));
  }

  void stmt(int depth, const Stmt& s) {
    std::string at = "  @" + std::to_string(s.loc.line);
    switch (s.kind) {
      case StmtKind::Tilde: {
        std::ostringstream t;
        t << "tilde " << to_source(*s.lhs) << " ~ " << s.name << '(';
        print_list(t, s.args);
        t << ')';
        line(depth, t.str() + at);
        break;
      }
      case StmtKind::Target: line(depth, "target += " + to_source(*s.args[0]) + at); break;
      case StmtKind::Assign:
        line(depth, "assign " + to_source(*s.lhs) + " " + s.name + " " + to_source(*s.args[0]) + at);
        break;
      case StmtKind::For:
        line(depth, "for " + s.name + " in " + to_source(*s.args[0]) + ":" + to_source(*s.args[1]) + at);
        stmt(depth + 1, *s.body[0]);
        break;
      case StmtKind::If:
        line(depth, "if " + to_source(*s.args[0]) + at);
        stmt(depth + 1, *s.body[0]);
        if (s.body.size() > 1) {
          line(depth, "else");
          stmt(depth + 1, *s.body[1]);
        }
        break;
      case StmtKind::Block:
        line(depth, "block" + at);
        for (const StmtPtr& b : s.body) stmt(depth + 1, *b);
        break;
      case StmtKind::Decl: decl(depth, *s.decl); break;
      case StmtKind::Return:
        line(depth, "return" + (s.args.empty() ? std::string() : " " + to_source(*s.args[0])) + at);
        break;
      case StmtKind::Empty: line(depth, "empty" + at); break;
    }
  }

  std::ostringstream out_;
};

}  // namespace

std::string to_source(const Expr& expr) {
  std::ostringstream out;
  print(out, expr);
  return out.str();
}

std::string dump_ast(const Program& program) { return AstDumper().run(program); }

}  // namespace fvic
