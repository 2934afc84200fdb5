#pragma once
// The data table of a generated program: every declaration of the data blocks (name, party,
// int or real, dims and bounds as expressions over data, the declaration as written) and the
// size equalities the checker left to the data, as the C struct `fvi_data_table kDataTable`
// (runtime/include/fvi/kernel/abi.h). The runtime's validator (fvi/data/validate.h) interprets
// it before inference starts, so a party's data that does not match the model is rejected with
// a message naming the file, the variable and the declaration.
#include <array>
#include <ostream>
#include <string>

#include "frontend/semantic.h"

namespace fvic::backend {

// Writes the definitions of kDataTable (and the arrays it points to) into `out`. Sizes and
// bounds the runtime cannot evaluate (a function call, an indexed value) are written as "" and
// left unchecked.
void emit_data_table(const SemanticModel& model, const std::array<std::string, 3>& transformed_data, std::ostream& out);

}  // namespace fvic::backend
