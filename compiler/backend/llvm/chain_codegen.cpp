#include "backend/llvm/chain_codegen.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <map>
#include <stdexcept>

#include "backend/llvm/runtime_calls.h"
#include "fvi/kernel/distributions.h"

namespace fvic::backend::llvm_jit {

using graph::Chain;
using ir::Op;
using fvi::kernel::UnaryFn;

namespace {

// Whether member m is computed inline in the generated loop (else it calls the runtime).
bool inline_unary(UnaryFn f) {
  switch (f) {
    case UnaryFn::exp: case UnaryFn::log: case UnaryFn::log1p: case UnaryFn::expm1: case UnaryFn::log1m:
    case UnaryFn::inv_logit: case UnaryFn::logit: case UnaryFn::log_inv_logit: case UnaryFn::log1m_inv_logit:
    case UnaryFn::log1p_exp: case UnaryFn::tanh: case UnaryFn::sin: case UnaryFn::cos: case UnaryFn::sqrt:
    case UnaryFn::safe_sqrt: case UnaryFn::square: case UnaryFn::inv: case UnaryFn::inv_sqrt: case UnaryFn::relu:
    case UnaryFn::fabs: case UnaryFn::abs: case UnaryFn::neg:
      return true;
    default:
      return false;
  }
}
bool inline_derivative(UnaryFn f) {
  switch (f) {
    case UnaryFn::exp: case UnaryFn::log: case UnaryFn::log1p: case UnaryFn::expm1: case UnaryFn::inv_logit:
    case UnaryFn::log_inv_logit: case UnaryFn::log1m_inv_logit: case UnaryFn::log1p_exp: case UnaryFn::tanh:
    case UnaryFn::sqrt: case UnaryFn::safe_sqrt: case UnaryFn::square: case UnaryFn::inv: case UnaryFn::relu:
    case UnaryFn::fabs: case UnaryFn::abs: case UnaryFn::neg: case UnaryFn::sin: case UnaryFn::cos:
      return true;
    default:
      return false;
  }
}
bool inline_distribution(const std::string& d) { return d == "normal" || d == "bernoulli_logit"; }

bool is_inline(const Chain::Member& m) {
  switch (m.op) {
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Neg:
      return true;
    case Op::Unary:
      return inline_unary(m.fn);
    case Op::UnaryDerivative:
      return inline_derivative(m.fn);
    case Op::Lpdf: case Op::LpdfVjp:
      return inline_distribution(m.name);
    default:
      return false;
  }
}

// One chain's block function in one scalar type: the members in order, runs of inline members as
// one loop over the block's elements (values in registers), the others as calls of the runtime's
// block functions on whole blocks. A member is stored when it escapes the chain or a call or a
// later loop reads it.
class ChainEmitter {
 public:
  ChainEmitter(llvm::Module& module, llvm::Type* real, bool is_double)
      : module_(module), context_(module.getContext()), b_(context_), real_(real), double_(is_double) {}

  llvm::Function* emit(const Chain& c, const std::string& name) {
    c_ = &c;
    llvm::Type* ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty();
    auto* type = llvm::FunctionType::get(b_.getVoidTy(), {i64, ptr, ptr}, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::Argument* args = fn_->arg_begin();
    n_ = &args[0], leaves_ = &args[1], nodes_ = &args[2];
    b_.SetInsertPoint(llvm::BasicBlock::Create(context_, "entry", fn_));
    // Every pointer of the block read once, before the loops.
    for (size_t l = 0; l < c.leaves.size(); ++l) leaf_ptr_.push_back(load_pointer(leaves_, l));
    for (size_t k = 0; k < c.members.size(); ++k) node_ptr_.push_back(load_pointer(nodes_, k));
    stored_ = stored_members(c);
    for (size_t k = 0; k < c.members.size();) {
      if (!is_inline(c.members[k])) {
        emit_call(k);
        ++k;
        continue;
      }
      size_t end = k;
      while (end < c.members.size() && is_inline(c.members[end])) ++end;
      emit_loop(k, end);
      k = end;
    }
    b_.CreateRetVoid();
    return fn_;
  }

  int inline_count = 0, call_count = 0;

 private:
  llvm::Value* load_pointer(llvm::Value* array, size_t at) {
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), array, at);
    return b_.CreateLoad(b_.getPtrTy(), slot);
  }

  // Members whose block must be in memory: escaping ones, and those read by a member in another
  // run (a call, or a later loop).
  std::vector<bool> stored_members(const Chain& c) const {
    std::vector<bool> stored(c.members.size(), false);
    std::vector<int> run(c.members.size());
    int r = 0;
    for (size_t k = 0; k < c.members.size(); ++k) {
      const bool in = is_inline(c.members[k]);
      if (!in || k == 0 || !is_inline(c.members[k - 1])) ++r;
      run[k] = r;
      stored[k] = c.out_of_node[k] >= 0;
    }
    for (size_t k = 0; k < c.members.size(); ++k)
      for (const Chain::Operand& o : c.members[k].operands)
        if (o.member && (run[size_t(o.at)] != run[k] || !is_inline(c.members[k]))) stored[size_t(o.at)] = true;
    return stored;
  }

  llvm::Constant* constant(double v) { return llvm::ConstantFP::get(real_, v); }

  llvm::Function* intrinsic(llvm::Intrinsic::ID id) { return llvm::Intrinsic::getDeclaration(&module_, id, {real_}); }
  llvm::Value* call_intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) { return b_.CreateCall(intrinsic(id), {x}); }

  // A libm function of one argument (log1p, expm1, tanh; their f-suffixed forms in float),
  // declared free of side effects so that the loop vectoriser may use its vector forms.
  llvm::Value* call_libm(const std::string& name, llvm::Value* x) {
    const std::string symbol = double_ ? name : name + "f";
    llvm::FunctionCallee f = module_.getOrInsertFunction(symbol, real_, real_);
    if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
      fn->setDoesNotAccessMemory();
      fn->setDoesNotThrow();
      fn->addFnAttr(llvm::Attribute::WillReturn);
    }
    return b_.CreateCall(f, {x});
  }

  // The elementwise formulas of ops_unary.h and distributions.h, one element.
  llvm::Value* exp(llvm::Value* x) { return call_intrinsic(llvm::Intrinsic::exp, x); }
  llvm::Value* log(llvm::Value* x) { return call_intrinsic(llvm::Intrinsic::log, x); }
  llvm::Value* inv_logit(llvm::Value* x) {
    return b_.CreateFDiv(constant(1), b_.CreateFAdd(constant(1), exp(b_.CreateFNeg(x))));
  }
  // log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x|, log1p(t) as log(u) - ((u - 1) - t) / u, u = 1 + t
  // (ops_unary.h log1p_exp_array).
  llvm::Value* log1p_exp(llvm::Value* x) {
    llvm::Value* t = exp(b_.CreateFNeg(call_intrinsic(llvm::Intrinsic::fabs, x)));
    llvm::Value* u = b_.CreateFAdd(t, constant(1));
    llvm::Value* correction = b_.CreateFDiv(b_.CreateFSub(b_.CreateFSub(u, constant(1)), t), u);
    llvm::Value* positive = b_.CreateSelect(b_.CreateFCmpOLT(x, constant(0)), constant(0), x);
    return b_.CreateFAdd(positive, b_.CreateFSub(log(u), correction));
  }
  llvm::Value* square(llvm::Value* x) { return b_.CreateFMul(x, x); }

  llvm::Value* unary(UnaryFn f, llvm::Value* x) {
    switch (f) {
      case UnaryFn::exp: return exp(x);
      case UnaryFn::log: return log(x);
      case UnaryFn::log1p: return call_libm("log1p", x);
      case UnaryFn::expm1: return call_libm("expm1", x);
      case UnaryFn::log1m: return call_libm("log1p", b_.CreateFNeg(x));
      case UnaryFn::inv_logit: return inv_logit(x);
      case UnaryFn::logit: return log(b_.CreateFDiv(x, b_.CreateFSub(constant(1), x)));
      case UnaryFn::log_inv_logit: return b_.CreateFNeg(log1p_exp(b_.CreateFNeg(x)));
      case UnaryFn::log1m_inv_logit: return b_.CreateFNeg(log1p_exp(x));
      case UnaryFn::log1p_exp: return log1p_exp(x);
      case UnaryFn::tanh: return call_libm("tanh", x);
      case UnaryFn::sin: return call_intrinsic(llvm::Intrinsic::sin, x);
      case UnaryFn::cos: return call_intrinsic(llvm::Intrinsic::cos, x);
      case UnaryFn::sqrt: case UnaryFn::safe_sqrt: return call_intrinsic(llvm::Intrinsic::sqrt, x);
      case UnaryFn::square: return square(x);
      case UnaryFn::inv: return b_.CreateFDiv(constant(1), x);
      case UnaryFn::inv_sqrt: return b_.CreateFDiv(constant(1), call_intrinsic(llvm::Intrinsic::sqrt, x));
      case UnaryFn::relu: return b_.CreateSelect(b_.CreateFCmpOLT(x, constant(0)), constant(0), x);
      case UnaryFn::fabs: case UnaryFn::abs: return call_intrinsic(llvm::Intrinsic::fabs, x);
      case UnaryFn::neg: return b_.CreateFNeg(x);
      default: throw std::logic_error("the LLVM backend has no inline form of this function");
    }
  }

  llvm::Value* derivative(UnaryFn f, llvm::Value* x, llvm::Value* y) {
    llvm::Value* one = constant(1);
    switch (f) {
      case UnaryFn::exp: return y;
      case UnaryFn::log: return b_.CreateFDiv(one, x);
      case UnaryFn::log1p: return b_.CreateFDiv(one, b_.CreateFAdd(one, x));
      case UnaryFn::expm1: return b_.CreateFAdd(y, one);
      case UnaryFn::inv_logit: return b_.CreateFMul(y, b_.CreateFSub(one, y));
      case UnaryFn::log_inv_logit: return inv_logit(b_.CreateFNeg(x));
      case UnaryFn::log1m_inv_logit: return b_.CreateFNeg(inv_logit(x));
      case UnaryFn::log1p_exp: return inv_logit(x);
      case UnaryFn::tanh: return b_.CreateFSub(one, square(y));
      case UnaryFn::sin: return call_intrinsic(llvm::Intrinsic::cos, x);
      case UnaryFn::cos: return b_.CreateFNeg(call_intrinsic(llvm::Intrinsic::sin, x));
      case UnaryFn::sqrt: return b_.CreateFMul(constant(0.5), b_.CreateFDiv(one, y));
      // derivative 0 where the value is 0 (ops_unary.h safe_sqrt)
      case UnaryFn::safe_sqrt:
        return b_.CreateSelect(b_.CreateFCmpOGT(y, constant(0)), b_.CreateFDiv(constant(0.5), y), constant(0));
      case UnaryFn::square: return b_.CreateFMul(constant(2), x);
      case UnaryFn::inv: return b_.CreateFNeg(square(y));
      case UnaryFn::relu: return b_.CreateSelect(b_.CreateFCmpOGT(x, constant(0)), one, constant(0));
      case UnaryFn::fabs: case UnaryFn::abs:  // sign(x): 0 at 0
        return b_.CreateSelect(b_.CreateFCmpOGT(x, constant(0)), one,
                               b_.CreateSelect(b_.CreateFCmpOLT(x, constant(0)), constant(-1), constant(0)));
      case UnaryFn::neg: return constant(-1);
      default: throw std::logic_error("the LLVM backend has no inline derivative of this function");
    }
  }

  // distributions.h scalar_lpdf for the inline distributions: operands y, then the parameters.
  llvm::Value* lpdf(const std::string& d, const std::vector<llvm::Value*>& v) {
    if (d == "normal") {  // -z^2 / 2 - log(sigma) - log(sqrt(2 pi)), z = (y - mu) / sigma
      llvm::Value* z = b_.CreateFDiv(b_.CreateFSub(v[0], v[1]), v[2]);
      llvm::Value* half = b_.CreateFMul(constant(-0.5), square(z));
      return b_.CreateFSub(b_.CreateFSub(half, log(v[2])), constant(fvi::kernel::detail::kLogSqrtTwoPi));
    }
    // bernoulli_logit: y eta - log(1 + e^eta)
    return b_.CreateFSub(b_.CreateFMul(v[0], v[1]), log1p_exp(v[1]));
  }
  // scalar_partial: d(log density)/d(operand k).
  llvm::Value* partial(const std::string& d, int k, const std::vector<llvm::Value*>& v) {
    if (d == "normal") {
      llvm::Value* z = b_.CreateFDiv(b_.CreateFSub(v[0], v[1]), v[2]);
      if (k == 0) return b_.CreateFDiv(b_.CreateFNeg(z), v[2]);
      if (k == 1) return b_.CreateFDiv(z, v[2]);
      return b_.CreateFDiv(b_.CreateFSub(square(z), constant(1)), v[2]);
    }
    if (k == 0) return constant(0);
    return b_.CreateFSub(v[0], inv_logit(v[1]));
  }

  llvm::Value* element(const Chain::Member& m, const std::vector<llvm::Value*>& x) {
    switch (m.op) {
      case Op::Add: return b_.CreateFAdd(x[0], x[1]);
      case Op::Sub: return b_.CreateFSub(x[0], x[1]);
      case Op::Mul: return b_.CreateFMul(x[0], x[1]);
      case Op::Div: return b_.CreateFDiv(x[0], x[1]);
      case Op::Pow: return b_.CreateCall(intrinsic(llvm::Intrinsic::pow), {x[0], x[1]});
      case Op::Neg: return b_.CreateFNeg(x[0]);
      case Op::Unary: return unary(m.fn, x[0]);
      case Op::UnaryDerivative: return derivative(m.fn, x[0], x[1]);
      case Op::Lpdf: return lpdf(m.name, x);
      case Op::LpdfVjp: {  // g .* partial
        std::vector<llvm::Value*> operands(x.begin() + 1, x.end());
        return b_.CreateFMul(x[0], partial(m.name, m.k, operands));
      }
      default: throw std::logic_error("the LLVM backend cannot inline this operation");
    }
  }

  llvm::Value* operand_pointer(const Chain::Operand& o) {
    return o.member ? node_ptr_[size_t(o.at)] : leaf_ptr_[size_t(o.at)];
  }

  // Members [begin, end), all inline: for i in [0, n): each member's element from its operands'.
  void emit_loop(size_t begin, size_t end) {
    llvm::BasicBlock* before = b_.GetInsertBlock();
    llvm::BasicBlock* body = llvm::BasicBlock::Create(context_, "loop", fn_);
    llvm::BasicBlock* after = llvm::BasicBlock::Create(context_, "after", fn_);
    b_.CreateCondBr(b_.CreateICmpSGT(n_, b_.getInt64(0)), body, after);
    b_.SetInsertPoint(body);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
    i->addIncoming(b_.getInt64(0), before);
    std::map<size_t, llvm::Value*> value;
    auto load = [&](llvm::Value* base) {
      return b_.CreateLoad(real_, b_.CreateInBoundsGEP(real_, base, i));
    };
    for (size_t k = begin; k < end; ++k) {
      const Chain::Member& m = c_->members[k];
      std::vector<llvm::Value*> x;
      for (const Chain::Operand& o : m.operands) {
        if (o.member && value.count(size_t(o.at))) x.push_back(value.at(size_t(o.at)));
        else x.push_back(load(operand_pointer(o)));
      }
      llvm::Value* v = element(m, x);
      value[k] = v;
      if (stored_[k]) b_.CreateStore(v, b_.CreateInBoundsGEP(real_, node_ptr_[k], i));
      ++inline_count;
    }
    llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1), "next", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, n_), body, after);
    b_.SetInsertPoint(after);
  }

  // Member k on the whole block through the runtime (runtime_calls.h).
  void emit_call(size_t k) {
    const Chain::Member& m = c_->members[k];
    const std::string suffix = double_ ? "_d" : "_f";
    llvm::Type* ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty(), *i32 = b_.getInt32Ty();
    llvm::Value* out = node_ptr_[k];
    auto pointers = [&](size_t first) {  // the operands' block pointers, as an array
      const size_t count = m.operands.size() - first;
      llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      llvm::Value* array = entry.CreateAlloca(ptr, b_.getInt64(count));
      for (size_t a = first; a < m.operands.size(); ++a)
        b_.CreateStore(operand_pointer(m.operands[a]), b_.CreateConstInBoundsGEP1_64(ptr, array, a - first));
      return std::pair<llvm::Value*, llvm::Value*>{array, b_.getInt64(count)};
    };
    // The distribution's calls read the member (its name, its operand differentiated).
    auto member = [&] { return b_.CreateIntToPtr(b_.getInt64(reinterpret_cast<uint64_t>(&m)), ptr); };
    switch (m.op) {
      case Op::Unary: {
        auto f = module_.getOrInsertFunction(kUnaryBlock + suffix, b_.getVoidTy(), i32, ptr, i64, ptr);
        b_.CreateCall(f, {b_.getInt32(int(m.fn)), operand_pointer(m.operands[0]), n_, out});
        break;
      }
      case Op::UnaryDerivative: {
        auto f = module_.getOrInsertFunction(kUnaryDerivativeBlock + suffix, b_.getVoidTy(), i32, ptr, ptr, i64, ptr);
        b_.CreateCall(f, {b_.getInt32(int(m.fn)), operand_pointer(m.operands[0]), operand_pointer(m.operands[1]), n_, out});
        break;
      }
      case Op::Lpdf: {
        auto [xs, count] = pointers(0);
        auto f = module_.getOrInsertFunction(kLpdfBlock + suffix, b_.getVoidTy(), ptr, ptr, i64, i64, ptr);
        b_.CreateCall(f, {member(), xs, count, n_, out});
        break;
      }
      case Op::LpdfVjp: {
        auto [xs, count] = pointers(1);
        auto f = module_.getOrInsertFunction(kLpdfVjpBlock + suffix, b_.getVoidTy(), ptr, ptr, ptr, i64, i64, ptr);
        b_.CreateCall(f, {member(), operand_pointer(m.operands[0]), xs, count, n_, out});
        break;
      }
      default:
        throw std::logic_error(std::string("a fused chain cannot hold ") + ir::op_name(m.op));
    }
    ++call_count;
  }

  llvm::Module& module_;
  llvm::LLVMContext& context_;
  llvm::IRBuilder<> b_;
  llvm::Type* real_;
  bool double_;
  const Chain* c_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::Value *n_ = nullptr, *leaves_ = nullptr, *nodes_ = nullptr;
  std::vector<llvm::Value*> leaf_ptr_, node_ptr_;
  std::vector<bool> stored_;
};

}  // namespace

EmitCounts emit_chain(llvm::Module& module, const Chain& chain, bool is_double, const std::string& name) {
  llvm::LLVMContext& context = module.getContext();
  ChainEmitter emitter(module, is_double ? llvm::Type::getDoubleTy(context) : llvm::Type::getFloatTy(context), is_double);
  emitter.emit(chain, name);
  return {emitter.inline_count, emitter.call_count};
}

}  // namespace fvic::backend::llvm_jit
