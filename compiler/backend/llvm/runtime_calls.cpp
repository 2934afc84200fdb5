#include "backend/llvm/runtime_calls.h"

#include "backend/graph/chain.h"
#include "fvi/kernel/fused.h"
#include "fvi/kernel/instances.h"

namespace fvic::backend::llvm_jit {

namespace {

namespace k = fvi::kernel;
using Member = graph::Chain::Member;

template <class T>
void unary(int fn, const T* x, long long n, T* out) {
  k::unary_block<T>(k::UnaryFn(fn), x, n, out);
}
template <class T>
void unary_derivative(int fn, const T* x, const T* y, long long n, T* out) {
  k::unary_derivative_block<T>(k::UnaryFn(fn), x, y, n, out);
}
template <class T>
void lpdf(const Member* m, const T* const* xs, long long count, long long n, T* out) {
  thread_local std::vector<const T*> operands;
  operands.assign(xs, xs + count);
  k::lpdf_block<T>(m->name, operands, n, out);
}
template <class T>
void lpdf_vjp(const Member* m, const T* g, const T* const* xs, long long count, long long n, T* out) {
  thread_local std::vector<const T*> operands;
  operands.assign(xs, xs + count);
  k::lpdf_vjp_block<T>(m->name, size_t(m->k), g, operands, n, out);
}

template <class F>
void* address(F* f) {
  return reinterpret_cast<void*>(f);
}

}  // namespace

std::vector<RuntimeCall> runtime_calls() {
  return {{kUnaryBlock + "_d", address(&unary<double>)},
          {kUnaryBlock + "_f", address(&unary<float>)},
          {kUnaryDerivativeBlock + "_d", address(&unary_derivative<double>)},
          {kUnaryDerivativeBlock + "_f", address(&unary_derivative<float>)},
          {kLpdfBlock + "_d", address(&lpdf<double>)},
          {kLpdfBlock + "_f", address(&lpdf<float>)},
          {kLpdfVjpBlock + "_d", address(&lpdf_vjp<double>)},
          {kLpdfVjpBlock + "_f", address(&lpdf_vjp<float>)}};
}

}  // namespace fvic::backend::llvm_jit
