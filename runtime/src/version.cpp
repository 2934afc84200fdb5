#include "fvi/version.h"
namespace fvi {
const char* version() { return "0.1.0"; }
}
