// The kernel operations, instantiated once for double and float (fvi/kernel/instances.h).
#include "fvi/kernel/instances.h"

namespace fvi::kernel {
FVI_KERNEL_INSTANCES(template, double)
FVI_KERNEL_INSTANCES(template, float)
template fvi_tensor export_abi<float>(const Tensor<float>&, Tensor<double>&);
}  // namespace fvi::kernel
