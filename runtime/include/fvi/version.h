#pragma once
// The runtime's version, checked by generated programs against the compiler that emitted them.
namespace fvi {
const char* version();
}
