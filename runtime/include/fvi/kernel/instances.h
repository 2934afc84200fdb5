#pragma once
// The kernel operations generated code calls, instantiated once in libfvi for double and float
// (runtime/src/kernel/instances.cpp) and declared `extern template` here, so that a generated
// translation unit compiles only its own factor classes and not, again, every distribution and
// every function of the string-dispatched `unary` and `lpdf` (bench/: compile time).
#include "fvi/kernel/abi_support.h"
#include "fvi/kernel/fused.h"
#include "fvi/kernel/random.h"

// P is `extern template` (declaration) or `template` (definition).
#define FVI_KERNEL_INSTANCES(P, T)                                                                          \
  P Tensor<T> add<T>(const Tensor<T>&, const Tensor<T>&);                                                   \
  P Tensor<T> sub<T>(const Tensor<T>&, const Tensor<T>&);                                                   \
  P Tensor<T> mul<T>(const Tensor<T>&, const Tensor<T>&);                                                   \
  P Tensor<T> div<T>(const Tensor<T>&, const Tensor<T>&);                                                   \
  P Tensor<T> pow<T>(const Tensor<T>&, const Tensor<T>&);                                                   \
  P Tensor<T> neg<T>(const Tensor<T>&);                                                                     \
  P Tensor<T> compare<T>(const std::string&, const Tensor<T>&, const Tensor<T>&);                           \
  P Tensor<T> select<T>(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&);                              \
  P Tensor<T> reduce<T>(const std::string&, const Tensor<T>&);                                              \
  P Tensor<T> unary<T>(const std::string&, const Tensor<T>&);                                               \
  P Tensor<T> unary_derivative<T>(const std::string&, const Tensor<T>&, const Tensor<T>&);                  \
  P Tensor<T> matmul<T>(const Tensor<T>&, const Tensor<T>&);                                                \
  P Tensor<T> matmul_grad_left<T>(const Tensor<T>&, const Tensor<T>&, Eigen::Index);                        \
  P Tensor<T> matmul_grad_right<T>(const Tensor<T>&, const Tensor<T>&, Eigen::Index);                       \
  P RowBlock<T> row_block<T>(const Tensor<T>&, int64_t, int64_t);                                          \
  P Tensor<T> matmul<T>(const RowBlock<T>&, const Tensor<T>&);                                              \
  P Tensor<T> matmul_grad_right<T>(const RowBlock<T>&, const Tensor<T>&, Eigen::Index);                     \
  P Tensor<T> transpose<T>(const Tensor<T>&);                                                               \
  P Tensor<T> reshape<T>(const Tensor<T>&, Eigen::Index, Eigen::Index);                                     \
  P Tensor<T> sum<T>(const Tensor<T>&);                                                                     \
  P Tensor<T> rows_dot_product<T>(const Tensor<T>&, const Tensor<T>&);                                      \
  P Tensor<T> broadcast<T>(const Tensor<T>&, Eigen::Index, Eigen::Index);                                   \
  P Tensor<T> sum_to<T>(const Tensor<T>&, Eigen::Index, Eigen::Index, Eigen::Index);                        \
  P Tensor<T> sum_like<T>(const Tensor<T>&, const Tensor<T>&);                                              \
  P Tensor<T> cumulative_sum<T>(const Tensor<T>&);                                                         \
  P Tensor<T> cumulative_sum_grad<T>(const Tensor<T>&);                                                    \
  P Tensor<T> log_softmax<T>(const Tensor<T>&);                                                             \
  P Tensor<T> softmax<T>(const Tensor<T>&);                                                                 \
  P Tensor<T> log_softmax_grad<T>(const Tensor<T>&, const Tensor<T>&);                                      \
  P Tensor<T> softmax_grad<T>(const Tensor<T>&, const Tensor<T>&);                                          \
  P Tensor<T> slice<T>(const Tensor<T>&, Eigen::Index, Eigen::Index, Eigen::Index);                         \
  P void add_to_slice<T>(Tensor<T>&, const Tensor<T>&, Eigen::Index);                                       \
  P Tensor<T> index_rows<T>(const Tensor<T>&, const IntVec&);                                               \
  P Tensor<T> scatter_rows<T>(const Tensor<T>&, const IntVec&, Eigen::Index);                               \
  P Tensor<T> index_cols<T>(const Tensor<T>&, const IntVec&);                                               \
  P Tensor<T> scatter_cols<T>(const Tensor<T>&, const IntVec&, Eigen::Index);                               \
  P Tensor<T> concat_rows<T>(const Tensor<T>&, const Tensor<T>&);                                          \
  P Tensor<T> concat_cols<T>(const Tensor<T>&, const Tensor<T>&);                                          \
  P Tensor<T> concat_rows_part<T>(const Tensor<T>&, Eigen::Index, int);                                    \
  P Tensor<T> concat_cols_part<T>(const Tensor<T>&, Eigen::Index, int);                                    \
  P Tensor<T> lpdf<T>(const std::string&, const Operands<T>&);                                              \
  P void unary_block<T>(UnaryFn, const T*, Eigen::Index, T*);                                    \
  P void unary_derivative_block<T>(UnaryFn, const T*, const T*, Eigen::Index, T*);               \
  P void lpdf_block<T>(const std::string&, const std::vector<const T*>&, Eigen::Index, T*);                 \
  P void lpdf_vjp_block<T>(const std::string&, size_t, const T*, const std::vector<const T*>&, Eigen::Index, T*); \
  P void batch_rows_into<T>(const Tensor<T>&, int64_t, int64_t, Tensor<T>&);                               \
  P Tensor<T> lpdf_vjp<T>(const std::string&, size_t, const Tensor<T>&, const Operands<T>&);                \
  P Tensor<T> noise<T>(Eigen::Index, Eigen::Index, Eigen::Index, uint64_t, uint32_t, Eigen::Index,          \
                       Eigen::Index);                                                                       \
  P Tensor<T> from_abi<T>(const fvi_tensor&);                                                               \
  P void assign_from_abi<T>(const fvi_tensor&, Tensor<T>&);                                                 \
  P Tensor<T> slice<T>(const AbiColumn&, Eigen::Index, Eigen::Index, Eigen::Index);                         \
  P void assign_seed<T>(const fvi_tensor* const*, int, const Tensor<T>&, Tensor<T>&);                      \
  P Tensor<T> bind_data<T>(const fvi_data*, const char*, int64_t, int64_t);                                 \
  P Tensor<T> batch_rows<T>(const Tensor<T>&, int64_t, int64_t);                                            \
  P IntVec batch_index<T>(const Tensor<T>&, int64_t, int64_t);                                              \
  P void meanfield_sample<T>(const AbiColumn&, const AbiColumn*, Eigen::Index, uint64_t, uint32_t,           \
                             const std::vector<std::pair<int64_t, int64_t>>&, Tensor<T>&, Tensor<T>&);      \
  P void meanfield_chain<T>(const Tensor<T>&, const Tensor<T>&, bool, const std::vector<std::pair<int64_t, int64_t>>&, \
                            Tensor<T>&, Tensor<T>&, std::vector<GradientPiece<T>>&, std::vector<GradientPiece<T>>&); \
  P void write_gradient<T>(std::vector<GradientPiece<T>>, int64_t, int64_t, fvi_tensor&);                  \
  P void write_meanfield_gradient<T>(std::vector<GradientPiece<T>>, int64_t, const MeanFieldOutputs&, int, bool);

namespace fvi::kernel {
FVI_KERNEL_INSTANCES(extern template, double)
FVI_KERNEL_INSTANCES(extern template, float)
extern template fvi_tensor export_abi<float>(const Tensor<float>&, Tensor<double>&);
}  // namespace fvi::kernel
