#pragma once
// The statement machine (machine.h), instantiated once in libfvi for double and float
// (runtime/src/kernel/machine.cpp) and declared `extern template` here, so that a generated model
// with statements does not compile the whole machine again for both types (bench/README.md,
// "Statement programs": pk_oral's model, 31 s against 89 s with the tables of bytecode.h).
#include "fvi/kernel/instances.h"  // the machine calls the kernel operations libfvi instantiates
#include "fvi/kernel/machine.h"

namespace fvi::kernel {
extern template class Machine<double>;
extern template class Machine<float>;
}  // namespace fvi::kernel
