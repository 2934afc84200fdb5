// The statement machine, instantiated once for double and float (fvi/kernel/machine_instances.h).
#include "fvi/kernel/machine_instances.h"

namespace fvi::kernel {
template class Machine<double>;
template class Machine<float>;
}  // namespace fvi::kernel
