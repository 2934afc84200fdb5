#pragma once
// Transformed data built by statements (loops, ifs, element and slice assignments): which
// declarations are computed when the data is read rather than inside the kernels, and the
// program of statements each party runs to compute them (fvi/data/transformed_data.h describes
// the program's form; validation runs it, before any kernel reads the values as data).
//
// A declaration is computed at load when statements build it (it has no single defining
// expression). Its statements, and the declarations they read, go to the party that may read
// what they read: public data only, the public program (every party receives the values); a
// silo's data, each silo's; server data, the server's.
#include <array>
#include <string>

#include "frontend/diagnostics.h"
#include "frontend/semantic.h"

namespace fvic {

// Whether the declaration `d` (its value given: `vector[N] age2 = square(age);`) is one the runtime
// can compute when the data is read: its type and every function of its value are in the program's
// form (fvi/data/transformed_data.h), and every transformed datum it reads is computed then too.
bool computable_at_load(const SemanticModel& model, const VarDecl& d);

// The programs for the public data, the server and each silo (fvi_data_party order; "" where a
// party has nothing to compute). Reports what the runtime cannot compute (a function it lacks, a
// density, split data) and returns false then.
bool transformed_data_programs(const SemanticModel& model, std::array<std::string, 3>& programs, Diagnostics& diags);

}  // namespace fvic
