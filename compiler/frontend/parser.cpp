// Parse tree -> AST. Each build function names the grammar rule it implements (grammar/FVI.g4).
// ANTLR's own error messages are rewritten into located sentences that say what to do.
#include "frontend/parser.h"

#include <sstream>

#include "FVILexer.h"
#include "frontend/functions.h"
#include "frontend/data_products.h"
#include "frontend/stan_forms.h"
#include "FVIParser.h"
#include "antlr4-runtime.h"

namespace fvic {
namespace {

constexpr const char* kBlockOrder =
    "the blocks are, in this order: functions, data, server data, silo data, split data, transformed data, "
    "hyperparameters, parameters, transformed parameters, model, generated quantities, inference";

using P = FVIParser;

Loc loc_of(const antlr4::Token* token) {
  Loc loc;
  loc.line = static_cast<int>(token->getLine());
  loc.col = static_cast<int>(token->getCharPositionInLine()) + 1;
  loc.length = std::max<int>(1, static_cast<int>(token->getText().size()));
  return loc;
}

Loc loc_of(antlr4::tree::TerminalNode* node) { return loc_of(node->getSymbol()); }

// The whole span of a rule's text when it sits on one line, else its first token.
Loc loc_of(antlr4::ParserRuleContext* ctx) {
  Loc loc = loc_of(ctx->getStart());
  const antlr4::Token* stop = ctx->getStop();
  if (stop && stop->getLine() == ctx->getStart()->getLine() &&
      stop->getStopIndex() >= ctx->getStart()->getStartIndex())
    loc.length = static_cast<int>(stop->getStopIndex() - ctx->getStart()->getStartIndex() + 1);
  return loc;
}

std::string quoted_token(const antlr4::Token* token) {
  if (token->getType() == antlr4::Token::EOF) return "end of file";
  return "'" + token->getText() + "'";
}

// Rewrites ANTLR's "mismatched input 'x' expecting {...}" into our diagnostic form.
class SyntaxErrorListener : public antlr4::BaseErrorListener {
 public:
  explicit SyntaxErrorListener(Diagnostics& diags) : diags_(diags) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line,
                   size_t column, const std::string& msg, std::exception_ptr) override {
    if (++count_ > kMaxErrors || suppress_) return;
    // ANTLR's recovery after an error yields follow-on errors until the next block: after the
    // first error, report another only if it lies in a block opened after that error.
    if (auto* p = dynamic_cast<antlr4::Parser*>(recognizer); p && offending) {
      size_t at = offending->getTokenIndex();
      if (last_error_ != kNone) {
        std::vector<const antlr4::Token*> open = open_brackets(p->getTokenStream(), at);
        // A word where a block should start, at the top level, is a new error however the one
        // before was recovered from (Stan's transformed data, then transformed parameters...).
        const bool block_word = open.empty() && at > last_error_ && offending->getType() == FVILexer::IDENT &&
                                expects_block(msg);
        if (!block_word && (open.empty() || open.front()->getTokenIndex() <= last_error_)) return;
      }
      last_error_ = at;
    }
    Loc loc;
    loc.line = static_cast<int>(line);
    loc.col = static_cast<int>(column) + 1;
    if (!offending) {  // a lexer error; our catch-all token makes these rare
      diags_.error(loc, "cannot read the text here: " + msg,
                   "remove the character or put it inside a comment");
      return;
    }
    loc.length = std::max<int>(1, static_cast<int>(offending->getText().size()));
    auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
    if (offending->getType() == antlr4::Token::EOF) {
      end_of_file(parser, offending, loc);
      return;
    }
    if (offending->getType() == FVILexer::UNEXPECTED_CHAR) {
      diags_.error(loc, "unexpected character " + quoted_token(offending),
                   offending->getText() == "#"
                       ? "comments start with `//` (or are written `/* ... */`)"
                       : "this character has no meaning in .fvi; remove it or put it in a comment");
      return;
    }
    if (parser && unknown_block(parser, offending, msg, loc)) return;
    if (parser && misplaced_block(parser, offending, msg, loc)) return;
    if (parser && not_a_statement(parser, offending, msg)) return;
    if (parser && offending->getText() == "[") {
      // `real x[N];` is Stan's removed array syntax.
      antlr4::TokenStream* tokens = parser->getTokenStream();
      size_t i = offending->getTokenIndex();
      if (i > 0 && tokens->get(i - 1)->getType() == FVILexer::IDENT &&
          msg.find("expecting") != std::string::npos && msg.find("';'") != std::string::npos) {
        diags_.error(loc, "unexpected '[' after the name '" + tokens->get(i - 1)->getText() + "'",
                     "arrays are declared with the type first: write `array[N] real " +
                         tokens->get(i - 1)->getText() + ";` instead of `real " +
                         tokens->get(i - 1)->getText() + "[N];`");
        return;
      }
    }
    std::string expecting;
    auto at = msg.find("expecting ");
    if (at != std::string::npos) expecting = msg.substr(at + 10);
    std::string missing;
    std::string text = offending->getText();
    if (msg.rfind("missing ", 0) == 0) missing = msg.substr(8, msg.find(" at ") - 8);
    else if (expecting.find("';'") != std::string::npos) missing = "';'";
    else if ((text == ";" || text == "}") && expecting.find("')'") != std::string::npos) missing = "')'";
    else if ((text == ";" || text == "}") && expecting.find("']'") != std::string::npos) missing = "']'";
    const antlr4::Token* previous = nullptr;
    if (parser && offending->getTokenIndex() > 0)
      previous = parser->getTokenStream()->get(offending->getTokenIndex() - 1);
    if (previous && missing == "';'" &&
        (previous->getText() == ";" || previous->getText() == "{" || previous->getText() == "}"))
      missing.clear();  // nothing to end: the token itself is out of place
    if (!missing.empty() && previous) {
      // Point just past the token the missing one should follow: that is where it goes.
      Loc after = loc_of(previous);
      after.col += after.length;
      after.length = 1;
      diags_.error(after, "missing " + missing + " after " + quoted_token(previous),
                   missing == "';'" ? "end the statement or declaration with ';'"
                                    : "insert " + missing + " here");
      return;
    }
    std::string help = "check the syntax near here against the language reference";
    if (expecting == "';'") help = "end the statement or declaration with ';'";
    else if (!expecting.empty()) help = "expected " + expecting;
    diags_.error(loc, "unexpected " + quoted_token(offending), help);
  }

 private:
  // The end of the file came too early: point just past the last token (not at an empty line
  // after it) and name the innermost bracket left open.
  void end_of_file(antlr4::Parser* parser, const antlr4::Token* eof, Loc loc) {
    loc.length = 1;
    const antlr4::Token* open = nullptr;
    if (parser && eof->getTokenIndex() > 0) {
      antlr4::TokenStream* tokens = parser->getTokenStream();
      std::vector<const antlr4::Token*> stack = open_brackets(tokens, eof->getTokenIndex());
      if (!stack.empty()) open = stack.back();
      loc = loc_of(tokens->get(eof->getTokenIndex() - 1));
      loc.col += loc.length;
      loc.length = 1;
    }
    if (open) {
      std::string o = open->getText();
      std::string close = o == "{" ? "}" : o == "(" ? ")" : "]";
      diags_.error(loc, "unexpected end of file: the '" + o + "' on line " +
                            std::to_string(open->getLine()) + " is not closed",
                   "close it with '" + close + "'");
      return;
    }
    diags_.error(loc, "unexpected end of file",
                 "a block or statement is not finished; check for a missing '}' or ';'");
  }

  // The brackets opened before token `end` and not closed, outermost first.
  static std::vector<const antlr4::Token*> open_brackets(antlr4::TokenStream* tokens, size_t end) {
    std::vector<const antlr4::Token*> stack;
    for (size_t i = 0; i < end; ++i) {
      const antlr4::Token* t = tokens->get(i);
      std::string x = t->getText();
      if (x == "{" || x == "(" || x == "[") {
        stack.push_back(t);
      } else if ((x == "}" || x == ")" || x == "]") && !stack.empty()) {
        std::string o = stack.back()->getText();
        if ((o == "{" && x == "}") || (o == "(" && x == ")") || (o == "[" && x == "]")) stack.pop_back();
      }
    }
    return stack;
  }

  // A block keyword inside another block: usually the '}' of the block before is missing.
  bool misplaced_block(antlr4::Parser* parser, const antlr4::Token* offending, const std::string& msg,
                       Loc loc) {
    if (msg.find("'model'") != std::string::npos) return false;  // at the top level: not this
    antlr4::TokenStream* tokens = parser->getTokenStream();
    size_t i = offending->getTokenIndex();
    auto text = [&](size_t k) { return tokens->get(std::min(k, tokens->size() - 1))->getText(); };
    size_t type = offending->getType();
    std::string name = offending->getText();
    bool block = false;
    if (type == FVILexer::FUNCTIONS || type == FVILexer::DATA || type == FVILexer::HYPERPARAMETERS ||
        type == FVILexer::PARAMETERS || type == FVILexer::MODEL || type == FVILexer::INFERENCE) {
      block = text(i + 1) == "{";
    } else if (type == FVILexer::SERVER || type == FVILexer::SILO || type == FVILexer::SPLIT) {
      block = text(i + 1) == "data" && text(i + 2) == "{";
      name += " data";
    }
    if (!block) return false;
    std::vector<const antlr4::Token*> open = open_brackets(tokens, i);
    std::string help = "blocks cannot be nested; close the block before it with '}'";
    if (!open.empty())
      help = "blocks cannot be nested: is the '}' closing the '" + open.front()->getText() + "' on line " +
             std::to_string(open.front()->getLine()) + " missing?";
    diags_.error(loc, "the '" + name + "' block starts inside another block", help);
    suppress_ = true;  // what follows is parsed out of place: its errors would be noise
    return true;
  }

  // A model-block statement that is not one: Stan's print/while/<-/increment_log_prob, or an
  // expression on its own.
  bool not_a_statement(antlr4::Parser* parser, const antlr4::Token* offending, const std::string& msg) {
    antlr4::TokenStream* tokens = parser->getTokenStream();
    size_t i = offending->getTokenIndex();
    std::vector<const antlr4::Token*> open = open_brackets(tokens, i);
    if (open.empty() || open.front()->getTokenIndex() == 0 ||
        tokens->get(open.front()->getTokenIndex() - 1)->getType() != FVILexer::MODEL)
      return false;
    size_t start = i;
    while (start > 0) {
      std::string t = tokens->get(start - 1)->getText();
      if (t == ";" || t == "{" || t == "}") break;
      --start;
    }
    const antlr4::Token* first = tokens->get(start);
    std::string word = first->getText();
    std::string help;
    if (word == "print" || word == "reject")
      help = "fvic reports through its diagnostics and output files; remove the statement";
    else if (word == "while")
      help = "loop with `for (i in 1:N)`";
    else if (word == "break" || word == "continue")
      help = "loops run over their whole range; use `if` inside the loop";
    else if (word == "increment_log_prob")
      help = "this is Stan's removed form: write `target += ...;`";
    if (!help.empty()) {
      diags_.error(loc_of(first), "'" + word + "' is not part of .fvi", help);
      return true;
    }
    if (offending->getText() != ";" || msg.rfind("no viable alternative", 0) != 0) return false;
    for (size_t k = start; k + 1 < i; ++k) {
      const antlr4::Token* a = tokens->get(k);
      const antlr4::Token* b = tokens->get(k + 1);
      if (a->getText() == "<" && b->getText() == "-" && b->getStartIndex() == a->getStopIndex() + 1) {
        Loc arrow = loc_of(a);
        arrow.length = 2;
        diags_.error(arrow, "'<-' is not an assignment in .fvi", "write '=' (Stan removed '<-')");
        return true;
      }
    }
    Loc at = loc_of(first);
    if (offending->getLine() == first->getLine())
      at.length = static_cast<int>(offending->getStartIndex() - first->getStartIndex());
    bool density = word.size() > 5 && (word.compare(word.size() - 5, 5, "_lpdf") == 0 ||
                                       word.compare(word.size() - 5, 5, "_lpmf") == 0);
    diags_.error(at, "this expression is not a statement",
                 density ? "add it to the log density: `target += " + word + "(...);`"
                         : "a statement is `y ~ dist(...);`, `target += ...;`, an assignment `x = ...;`, "
                           "a declaration, `for` or `if`");
    return true;
  }

  // ANTLR's message at a token where only a block may start.
  static bool expects_block(const std::string& msg) {
    return msg.find("'model'") != std::string::npos && msg.find("'parameters'") != std::string::npos;
  }

  // A word where a block should start: Stan's blocks that .fvi does not have, or a typo.
  bool unknown_block(antlr4::Parser* parser, const antlr4::Token* offending, const std::string& msg,
                     Loc loc) {
    if (offending->getType() != FVILexer::IDENT || !expects_block(msg)) return false;
    std::string name = offending->getText();
    (void)parser;
    diags_.error(loc, "unknown block '" + name + "'", kBlockOrder);
    return true;
  }

  static constexpr int kMaxErrors = 20;
  Diagnostics& diags_;
  int count_ = 0;
  bool suppress_ = false;
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t last_error_ = kNone;  // token index of the last syntax error reported
};

class AstBuilder {
 public:
  explicit AstBuilder(Diagnostics& diags) : diags_(diags) {}

  // program : block* EOF
  std::unique_ptr<Program> program(P::ProgramContext* ctx) {
    auto prog = std::make_unique<Program>();
    int last_order = -1;
    for (P::BlockContext* b : ctx->block()) {
      std::optional<Block> parsed = this->block(b);
      if (!parsed) continue;
      Block& block = *parsed;
      int order = static_cast<int>(block.kind);
      if (const Block* prior = prog->find(block.kind)) {
        diags_.error(block.loc,
                     std::string("the '") + block_name(block.kind) + "' block appears twice",
                     "merge it with the one on line " + std::to_string(prior->loc.line));
        continue;
      }
      if (order < last_order) {
        diags_.error(block.loc,
                     std::string("the '") + block_name(block.kind) +
                         "' block is out of order",
                     kBlockOrder);
      }
      last_order = std::max(last_order, order);
      prog->blocks.push_back(std::move(block));
    }
    if (!prog->find(BlockKind::Model) && !diags_.has_errors()) {
      // Just past the last block (the end of the file may be an empty line).
      Loc end = loc_of(ctx->EOF());
      if (!ctx->block().empty()) {
        end = loc_of(ctx->block().back()->getStop());
        end.col += end.length;
        end.length = 1;
      }
      diags_.error(end, "the program has no 'model' block",
                   "add `model { ... }` with the priors and the likelihood");
    }
    return prog;
  }

 private:
  // nullopt for a block whose name is reported unknown.
  std::optional<Block> block(P::BlockContext* ctx) {
    Block b;
    b.loc = loc_of(ctx->getStart());
    auto take_decls = [&](const std::vector<P::VarDeclContext*>& decls) {
      for (P::VarDeclContext* d : decls) b.decls.push_back(var_decl(d, b.kind));
    };
    if (auto* c = dynamic_cast<P::FunctionsBlockContext*>(ctx)) {
      b.kind = BlockKind::Functions;
      for (P::FunctionDefContext* f : c->functionDef()) b.functions.push_back(function_def(f));
    } else if (auto* c = dynamic_cast<P::DataBlockContext*>(ctx)) {
      b.kind = BlockKind::Data;
      take_decls(c->varDecl());
    } else if (auto* c = dynamic_cast<P::ServerDataBlockContext*>(ctx)) {
      b.kind = BlockKind::ServerData;
      b.loc = span(c->SERVER(), c->DATA());
      take_decls(c->varDecl());
    } else if (auto* c = dynamic_cast<P::SiloDataBlockContext*>(ctx)) {
      b.kind = BlockKind::SiloData;
      b.loc = span(c->SILO(), c->DATA());
      take_decls(c->varDecl());
    } else if (auto* c = dynamic_cast<P::SplitDataBlockContext*>(ctx)) {
      b.kind = BlockKind::SplitData;
      b.loc = span(c->SPLIT(), c->DATA());
      take_decls(c->varDecl());
    } else if (auto* c = dynamic_cast<P::HyperparametersBlockContext*>(ctx)) {
      b.kind = BlockKind::Hyperparameters;
      take_decls(c->varDecl());
    } else if (auto* c = dynamic_cast<P::ParametersBlockContext*>(ctx)) {
      b.kind = BlockKind::Parameters;
      take_decls(c->varDecl());
    } else if (auto* c = dynamic_cast<P::ModelBlockContext*>(ctx)) {
      b.kind = BlockKind::Model;
      for (P::StatementContext* s : c->statement()) b.stmts.push_back(statement(s, b.kind));
    } else if (auto* c = dynamic_cast<P::DerivedBlockContext*>(ctx)) {
      std::string words = c->first->getText() + " " + c->second->getText();
      b.loc = loc_of(c->first);
      if (c->second->getLine() == c->first->getLine())
        b.loc.length = static_cast<int>(c->second->getCharPositionInLine() + c->second->getText().size() -
                                        c->first->getCharPositionInLine());
      if (words == "transformed data") b.kind = BlockKind::TransformedData;
      else if (words == "transformed parameters") b.kind = BlockKind::TransformedParameters;
      else if (words == "generated quantities") b.kind = BlockKind::GeneratedQuantities;
      else {
        diags_.error(b.loc, "unknown block '" + words + "'", kBlockOrder);
        return std::nullopt;
      }
      for (P::StatementContext* s : c->statement()) b.stmts.push_back(statement(s, b.kind));
    } else if (auto* c = dynamic_cast<P::InferenceBlockContext*>(ctx)) {
      b.kind = BlockKind::Inference;
      for (P::SettingContext* s : c->setting()) b.settings.push_back(setting(s));
    }
    if (b.loc.length == 1) b.loc.length = static_cast<int>(ctx->getStart()->getText().size());
    return b;
  }

  static Loc span(antlr4::tree::TerminalNode* a, antlr4::tree::TerminalNode* b) {
    Loc l = loc_of(a), r = loc_of(b);
    if (l.line == r.line) l.length = r.col + r.length - l.col;
    return l;
  }

  // varDecl : mark? type IDENT ('=' expr)? ';'
  VarDeclPtr var_decl(P::VarDeclContext* ctx, BlockKind block) {
    auto d = std::make_unique<VarDecl>();
    d->block = block;
    d->loc = loc_of(ctx->getStart());
    if (P::MarkContext* m = ctx->mark()) {
      d->mark_loc = loc_of(m);
      d->mark = m->GLOBAL() ? Mark::Global : m->LOCAL() ? Mark::Local : Mark::Split;
    }
    d->type = type(ctx->type());
    d->name = ctx->IDENT()->getText();
    d->name_loc = loc_of(ctx->IDENT());
    if (ctx->expr()) d->init = expr(ctx->expr());
    return d;
  }

  // type : (ARRAY '[' expr (',' expr)* ']')? baseType
  TypeDecl type(P::TypeContext* ctx) {
    TypeDecl t;
    t.loc = loc_of(ctx);
    for (P::ExprContext* e : ctx->expr()) t.array_sizes.push_back(expr(e));
    P::BaseTypeContext* base = ctx->baseType();
    P::BoundsContext* bounds = nullptr;
    std::vector<P::ExprContext*> sizes;
    if (auto* c = dynamic_cast<P::IntTypeContext*>(base)) {
      t.base = Base::Int;
      bounds = c->bounds();
    } else if (auto* c = dynamic_cast<P::RealTypeContext*>(base)) {
      t.base = Base::Real;
      bounds = c->bounds();
    } else if (auto* c = dynamic_cast<P::VectorTypeContext*>(base)) {
      t.base = Base::Vector;
      bounds = c->bounds();
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::RowVectorTypeContext*>(base)) {
      t.base = Base::RowVector;
      bounds = c->bounds();
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::MatrixTypeContext*>(base)) {
      t.base = Base::Matrix;
      bounds = c->bounds();
      sizes = c->expr();
    } else if (auto* c = dynamic_cast<P::SimplexTypeContext*>(base)) {
      t.base = Base::Vector;
      t.simplex = true;
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::OrderedTypeContext*>(base)) {
      t.base = Base::Vector;
      t.ordering = Ordering::Ordered;
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::PositiveOrderedTypeContext*>(base)) {
      t.base = Base::Vector;
      t.ordering = Ordering::PositiveOrdered;
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::CholeskyCorrTypeContext*>(base)) {
      t.base = Base::Matrix;
      t.structure = MatrixStructure::CholeskyCorr;
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::CholeskyCovTypeContext*>(base)) {
      t.base = Base::Matrix;
      t.structure = MatrixStructure::CholeskyCov;
      sizes = c->expr();
    } else if (auto* c = dynamic_cast<P::UnitVectorTypeContext*>(base)) {
      t.base = Base::Vector;
      t.structure = MatrixStructure::UnitVector;
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::CorrMatrixTypeContext*>(base)) {
      t.base = Base::Matrix;
      t.structure = MatrixStructure::Corr;
      sizes = {c->expr()};
    } else if (auto* c = dynamic_cast<P::CovMatrixTypeContext*>(base)) {
      t.base = Base::Matrix;
      t.structure = MatrixStructure::Cov;
      sizes = {c->expr()};
    }
    for (P::ExprContext* e : sizes) t.sizes.push_back(expr(e));
    if (bounds) {
      for (P::BoundContext* b : bounds->bound()) {
        std::string which = b->IDENT()->getText();
        ExprPtr value = arith(b->arith());
        ExprPtr* slot = which == "lower"        ? &t.lower
                        : which == "upper"      ? &t.upper
                        : which == "offset"     ? &t.offset
                        : which == "multiplier" ? &t.multiplier
                                                : nullptr;
        if (!slot) {
          diags_.error(loc_of(b->IDENT()), "unknown constraint '" + which + "'",
                       "a bound is written `lower=...` or `upper=...`; an affine transform `offset=...`, "
                       "`multiplier=...`");
        } else if (*slot) {
          diags_.error(loc_of(b->IDENT()), "the bound '" + which + "' is given twice",
                       "keep one `" + which + "=` in the angle brackets");
        } else {
          *slot = std::move(value);
        }
      }
    }
    return t;
  }

  // functionDef : returnType IDENT '(' (funArg (',' funArg)*)? ')' statement
  FunctionDef function_def(P::FunctionDefContext* ctx) {
    FunctionDef f;
    f.name = ctx->IDENT()->getText();
    f.loc = loc_of(ctx->IDENT());
    f.return_loc = loc_of(ctx->returnType());
    if (ctx->returnType()->VOID()) f.returns_void = true;
    else f.return_type = unsized(ctx->returnType()->unsizedType());
    for (P::FunArgContext* a : ctx->funArg())
      f.args.push_back({unsized(a->unsizedType()), a->DATA() != nullptr, a->IDENT()->getText(), loc_of(a->IDENT())});
    f.body = statement(ctx->statement(), BlockKind::Functions);
    return f;
  }

  // unsizedType : (ARRAY '[' ','* ']')? (INT | REAL | VECTOR | ROW_VECTOR | MATRIX)
  static Type unsized(P::UnsizedTypeContext* ctx) {
    Type t;
    t.base = ctx->INT() ? Base::Int : ctx->REAL() ? Base::Real : ctx->VECTOR() ? Base::Vector
           : ctx->ROW_VECTOR() ? Base::RowVector : Base::Matrix;
    if (ctx->ARRAY()) {
      t.array_dims = 1;
      for (antlr4::tree::ParseTree* child : ctx->children) t.array_dims += child->getText() == ",";
    }
    return t;
  }

  // statement : tildeStmt | targetStmt | assignStmt | forStmt | ifStmt | blockStmt | ...
  // `block`: where the statement stands (its declarations belong to that block).
  StmtPtr statement(P::StatementContext* ctx, BlockKind block) {
    Loc loc = loc_of(ctx->getStart());
    if (auto* c = dynamic_cast<P::TildeStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::Tilde, loc);
      std::vector<P::ExprContext*> es = c->expr();
      s->lhs = expr(es[0]);
      s->name = c->IDENT()->getText();
      s->name_loc = loc_of(c->IDENT());
      for (size_t i = 1; i < es.size(); ++i) s->args.push_back(expr(es[i]));
      return s;
    }
    if (auto* c = dynamic_cast<P::TargetStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::Target, loc);
      s->args.push_back(expr(c->expr()));
      return s;
    }
    if (auto* c = dynamic_cast<P::AssignStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::Assign, loc);
      s->lhs = expr(c->expr(0));
      s->name = c->op->getText();
      s->name_loc = loc_of(c->op);
      s->args.push_back(expr(c->expr(1)));
      return s;
    }
    if (auto* c = dynamic_cast<P::ForStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::For, loc);
      s->name = c->IDENT()->getText();
      s->name_loc = loc_of(c->IDENT());
      s->args.push_back(expr(c->expr(0)));
      s->args.push_back(expr(c->expr(1)));
      s->body.push_back(statement(c->statement(), block));
      return s;
    }
    if (auto* c = dynamic_cast<P::IfStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::If, loc);
      s->args.push_back(expr(c->expr()));
      for (P::StatementContext* b : c->statement()) s->body.push_back(statement(b, block));
      return s;
    }
    if (auto* c = dynamic_cast<P::BlockStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::Block, loc);
      for (P::StatementContext* b : c->statement()) s->body.push_back(statement(b, block));
      return s;
    }
    if (auto* c = dynamic_cast<P::DeclStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::Decl, loc);
      s->decl = var_decl(c->varDecl(), block);
      return s;
    }
    if (auto* c = dynamic_cast<P::ReturnStmtContext*>(ctx)) {
      auto s = std::make_unique<Stmt>(StmtKind::Return, loc);
      if (c->expr()) s->args.push_back(expr(c->expr()));
      return s;
    }
    return std::make_unique<Stmt>(StmtKind::Empty, loc);
  }

  ExprPtr make(ExprKind kind, antlr4::ParserRuleContext* ctx) {
    return std::make_unique<Expr>(kind, loc_of(ctx));
  }

  ExprPtr binary(antlr4::ParserRuleContext* ctx, const antlr4::Token* op, ExprPtr a, ExprPtr b) {
    auto e = make(ExprKind::Binary, ctx);
    e->name = op->getText();
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // expr : condExpr | orExpr | andExpr | eqExpr | cmpExpr | arithExpr
  ExprPtr expr(P::ExprContext* ctx) {
    if (auto* c = dynamic_cast<P::ArithExprContext*>(ctx)) return arith(c->arith());
    if (auto* c = dynamic_cast<P::CondExprContext*>(ctx)) {
      auto e = make(ExprKind::Cond, ctx);
      for (P::ExprContext* x : c->expr()) e->args.push_back(expr(x));
      return e;
    }
    if (auto* c = dynamic_cast<P::OrExprContext*>(ctx))
      return binary(ctx, expr(c->expr(0)), expr(c->expr(1)), "||");
    if (auto* c = dynamic_cast<P::AndExprContext*>(ctx))
      return binary(ctx, expr(c->expr(0)), expr(c->expr(1)), "&&");
    if (auto* c = dynamic_cast<P::EqExprContext*>(ctx))
      return binary(ctx, c->op, expr(c->expr(0)), expr(c->expr(1)));
    if (auto* c = dynamic_cast<P::CmpExprContext*>(ctx))
      return binary(ctx, c->op, expr(c->expr(0)), expr(c->expr(1)));
    return make(ExprKind::IntLit, ctx);  // unreachable for a tree without syntax errors
  }

  ExprPtr binary(antlr4::ParserRuleContext* ctx, ExprPtr a, ExprPtr b, const char* op) {
    auto e = make(ExprKind::Binary, ctx);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // arith : transposeExpr | indexExpr | powExpr | unaryExpr | mulExpr | addExpr | primaryExpr
  ExprPtr arith(P::ArithContext* ctx) {
    if (auto* c = dynamic_cast<P::PrimaryExprContext*>(ctx)) return primary(c->primary());
    if (auto* c = dynamic_cast<P::AddExprContext*>(ctx))
      return binary(ctx, c->op, arith(c->arith(0)), arith(c->arith(1)));
    if (auto* c = dynamic_cast<P::MulExprContext*>(ctx))
      return binary(ctx, c->op, arith(c->arith(0)), arith(c->arith(1)));
    if (auto* c = dynamic_cast<P::PowExprContext*>(ctx))
      return binary(ctx, c->op, arith(c->arith(0)), arith(c->arith(1)));
    if (auto* c = dynamic_cast<P::UnaryExprContext*>(ctx)) {
      auto e = make(ExprKind::Unary, ctx);
      e->name = c->op->getText();
      e->args.push_back(arith(c->arith()));
      return e;
    }
    if (auto* c = dynamic_cast<P::TransposeExprContext*>(ctx)) {
      auto e = make(ExprKind::Transpose, ctx);
      e->args.push_back(arith(c->arith()));
      return e;
    }
    if (auto* c = dynamic_cast<P::IndexExprContext*>(ctx)) {
      auto e = make(ExprKind::Index, ctx);
      e->args.push_back(arith(c->arith()));
      for (P::IndexContext* i : c->index()) e->indices.push_back(index(i));
      return e;
    }
    return make(ExprKind::IntLit, ctx);
  }

  // index : rangeIndex | singleIndex | allIndex
  Index index(P::IndexContext* ctx) {
    Index i;
    i.loc = loc_of(ctx->getStart());
    if (auto* c = dynamic_cast<P::RangeIndexContext*>(ctx)) {
      i.kind = IndexKind::Range;
      if (c->lo) i.lower = expr(c->lo);
      if (c->hi) i.upper = expr(c->hi);
    } else if (auto* c = dynamic_cast<P::SingleIndexContext*>(ctx)) {
      i.kind = IndexKind::Single;
      i.lower = expr(c->expr());
      i.loc = loc_of(c);
    } else {
      i.kind = IndexKind::All;
    }
    return i;
  }

  // primary : condCall | call | variable | intLiteral | realLiteral | parens | literals
  ExprPtr primary(P::PrimaryContext* ctx) {
    if (auto* c = dynamic_cast<P::VariableContext*>(ctx)) {
      auto e = make(ExprKind::Var, ctx);
      e->name = c->IDENT()->getText();
      return e;
    }
    if (auto* c = dynamic_cast<P::CallContext*>(ctx)) {
      auto e = make(ExprKind::Call, ctx);
      e->name = c->IDENT()->getText();
      for (P::ExprContext* a : c->expr()) e->args.push_back(expr(a));
      return e;
    }
    if (auto* c = dynamic_cast<P::CondCallContext*>(ctx)) {
      auto e = make(ExprKind::CondCall, ctx);
      e->name = c->IDENT()->getText();
      for (P::ExprContext* a : c->expr()) e->args.push_back(expr(a));
      return e;
    }
    if (auto* c = dynamic_cast<P::IntLiteralContext*>(ctx)) {
      auto e = make(ExprKind::IntLit, ctx);
      e->text = c->INT_LIT()->getText();
      try {
        e->int_value = std::stoll(e->text);
      } catch (const std::out_of_range&) {
        diags_.error(e->loc, "the integer " + e->text + " is too large",
                     "integers must fit in 64 bits; write it as a real, e.g. " + e->text + ".0");
      }
      return e;
    }
    if (auto* c = dynamic_cast<P::RealLiteralContext*>(ctx)) {
      auto e = make(ExprKind::RealLit, ctx);
      e->text = c->REAL_LIT()->getText();
      e->real_value = std::strtod(e->text.c_str(), nullptr);
      return e;
    }
    if (auto* c = dynamic_cast<P::ParensContext*>(ctx)) return expr(c->expr());
    if (auto* c = dynamic_cast<P::ArrayLiteralContext*>(ctx)) {
      auto e = make(ExprKind::ArrayLit, ctx);
      for (P::ExprContext* a : c->expr()) e->args.push_back(expr(a));
      return e;
    }
    if (auto* c = dynamic_cast<P::RowVectorLiteralContext*>(ctx)) {
      auto e = make(ExprKind::RowVectorLit, ctx);
      for (P::ExprContext* a : c->expr()) e->args.push_back(expr(a));
      return e;
    }
    return make(ExprKind::IntLit, ctx);
  }

  // setting : IDENT '=' settingValue ';'
  Setting setting(P::SettingContext* ctx) {
    Setting s;
    s.key = ctx->IDENT()->getText();
    s.key_loc = loc_of(ctx->IDENT());
    s.value = setting_value(ctx->settingValue());
    s.value_loc = loc_of(ctx->settingValue());
    return s;
  }

  // settingValue : namedValue | numberValue | stringValue
  stdlib::KeyValue setting_value(P::SettingValueContext* ctx) {
    stdlib::KeyValue v;
    if (auto* c = dynamic_cast<P::NamedValueContext*>(ctx)) {
      v.kind = stdlib::KeyValue::Kind::Name;
      v.text = c->IDENT()->getText();
      v.has_call = !c->settingValue().empty();
      for (P::SettingValueContext* a : c->settingValue()) v.args.push_back(setting_value(a));
    } else if (auto* c = dynamic_cast<P::NumberValueContext*>(ctx)) {
      v.kind = stdlib::KeyValue::Kind::Number;
      v.text = c->getText();
      v.is_integer = c->INT_LIT() != nullptr;
      v.number = std::strtod(v.text.c_str(), nullptr);
    } else if (auto* c = dynamic_cast<P::StringValueContext*>(ctx)) {
      v.kind = stdlib::KeyValue::Kind::String;
      std::string t = c->STRING()->getText();
      v.text = t.size() >= 2 ? t.substr(1, t.size() - 2) : t;
    }
    return v;
  }

  Diagnostics& diags_;
};

// ANTLR's parser recurses once per nesting level: per bracket, and per right-nested operator
// (prefix `-`/`!`, `^`, `?:`). Every later pass (the tree builder, checker, planner, lowering and
// emitter) recurses once per level of the expression tree, which a left-associative chain
// (`a + b + b + ...`) or a run of indexes (`a[1][1]...`) deepens by one per operator without any
// bracket. Bound all three per statement, outside comments and strings, so that no input can
// exhaust the stack of any pass (issue 27 item 3).
bool nesting_within_limit(const SourceFile& source, Diagnostics& diags) {
  constexpr int kMaxDepth = 128;
  constexpr int kMaxRightNested = 1000;  // per statement
  constexpr int kMaxOperators = 2000;    // per statement
  int depth = 0, right_nested = 0, operators = 0, line = 1, col = 0;
  char previous = ';';  // the last non-space character
  auto too_deep = [&](const std::string& what, int limit) {
    diags.error(Loc{line, col, 1}, what + " are nested more than " + std::to_string(limit) + " deep",
                "split the expression into local variables in the model block");
    return false;
  };
  const std::string& text = source.text();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    // Comments and strings hold no operators: skip to their end (a line of dashes is not a chain).
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '/' && next == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i, ++col;
      continue;
    }
    if (c == '/' && next == '*') {
      for (i += 2, col += 2; i < text.size() && !(text[i] == '*' && i + 1 < text.size() && text[i + 1] == '/'); ++i) {
        ++col;
        if (text[i] == '\n') ++line, col = 0;
      }
      ++i, ++col;  // the closing '/'
      continue;
    }
    if (c == '"') {
      while (i + 1 < text.size() && text[i + 1] != '"' && text[i + 1] != '\n') ++i, ++col;
      ++i, ++col;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxDepth) return too_deep("brackets", kMaxDepth);
    } else if (c == ')' || c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
    bool unary_position = std::string("=(,[{+-*/!^?:<>&|~").find(previous) != std::string::npos;
    if (c == '^' || c == '?' || c == '!' || ((c == '-' || c == '+') && unary_position))
      if (++right_nested > kMaxRightNested) return too_deep("operators", kMaxRightNested);
    if (std::string("+-*/%^<>=!&|?:.'[\\").find(c) != std::string::npos && ++operators > kMaxOperators) {
      diags.error(Loc{line, col, 1}, "this statement has more than " + std::to_string(kMaxOperators) + " operators",
                  "split the expression into local variables in the model block (each pass of the compiler "
                  "nests one level per operator)");
      return false;
    }
    if (c == ';' || c == '{' || c == '}') right_nested = 0, operators = 0;
    previous = c;
  }
  return true;
}

// ANTLR's input stream converts UTF-8 to code points and throws on invalid bytes; find them first.
bool valid_utf8(const SourceFile& source, Diagnostics& diags) {
  const std::string& t = source.text();
  int line = 1, col = 0;
  for (size_t i = 0; i < t.size();) {
    unsigned char c = static_cast<unsigned char>(t[i]);
    ++col;
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= t.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(t[i + k]) >> 6) == 0x2;
    if (ok && len > 1) {  // no overlong encodings, surrogates, or code points past U+10FFFF
      unsigned cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(t[i + k]) & 0x3F);
      static const unsigned kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (!ok) {
      diags.error(Loc{line, col, 1}, "the file is not valid UTF-8 here (byte " + std::to_string(i) + ")",
                  "save the model as UTF-8 text");
      return false;
    }
    if (c == '\n') {
      ++line;
      col = 0;
    }
    i += len;
  }
  return true;
}

// Statements nested within a bound: ifs, loops and blocks, where an `else if` chain nests one
// level per branch and braceless bodies (`if (N) if (N) ...`) pass every bracket bound above.
// The passes after the tree builder (desugaring, checker, lowering, the statement programs'
// translator) recurse once per level; this walk does not.
bool statements_within_limit(const Program& program, Diagnostics& diags) {
  constexpr int kMaxStatementDepth = 256;
  std::vector<std::pair<const Stmt*, int>> todo;
  for (const Block& b : program.blocks) {
    for (const StmtPtr& s : b.stmts)
      if (s) todo.push_back({s.get(), 1});
    for (const FunctionDef& f : b.functions)
      if (f.body) todo.push_back({f.body.get(), 1});
  }
  while (!todo.empty()) {
    const auto [s, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxStatementDepth) {
      diags.error(s->loc, "statements are nested more than " + std::to_string(kMaxStatementDepth) + " deep",
                  "ifs, loops and blocks count one level each, as does each `else if` of a chain; write a long "
                  "chain of cases with an array of values indexed by the case, or split it into functions");
      return false;
    }
    for (const StmtPtr& b : s->body)
      if (b) todo.push_back({b.get(), depth + 1});
  }
  return true;
}

}  // namespace

std::unique_ptr<Program> parse_program(const SourceFile& source, Diagnostics& diags) {
  if (!valid_utf8(source, diags) || !nesting_within_limit(source, diags)) return nullptr;
  antlr4::ANTLRInputStream input(source.text());
  FVILexer lexer(&input);
  antlr4::CommonTokenStream tokens(&lexer);
  FVIParser parser(&tokens);
  SyntaxErrorListener listener(diags);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  tokens.fill();  // every token is buffered, so an error message may look ahead of the offending one

  P::ProgramContext* tree = parser.program();
  if (diags.has_errors()) return nullptr;
  AstBuilder builder(diags);
  std::unique_ptr<Program> program = builder.program(tree);
  if (diags.has_errors() || !statements_within_limit(*program, diags)) return nullptr;
  desugar_user_densities(*program);
  desugar_stan_forms(*program);
  hoist_data_products(*program);
  return program;
}

}  // namespace fvic
