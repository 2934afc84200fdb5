#pragma once
// Transformed data built by statements (`for (i in 1:M) { s[i] = sum(y[i]); if (s[i] > 0) C += 1; }`,
// `Xc[:, i - 1] = X[:, i] - mean(X[:, i]);`), computed once when a party's data is read, as Stan
// computes its transformed data block. fvic writes each party's statements as a small
// S-expression program (fvi_data_table::transformed_data; compiler/backend/cpp/
// emit_transformed_data.cpp) and validation runs it over the party's data (fvi/data/validate.h),
// adding the declared values to that party's DataSet. Kernels then read them as data.
//
//   program  (program ITEM...)
//   ITEM     (input NAME TYPE BASE RANK)          a data variable the statements read
//            (decl LINE NAME TYPE BASE RANK EXPORT (DIM...) [EXPR])
//            (assign LINE OP LVALUE EXPR)         OP: = += -= *= /=
//            (for LINE VAR LO HI ITEM)  (if LINE COND ITEM [ITEM])  (block ITEM...)
//            (bounds LINE NAME LOWER UPPER)       every element within them (LOWER, UPPER: EXPR or _)
//   EXPR     (int N) (real X) (var NAME) (unary OP E) (bin OP A B) (cond C A B)
//            (call NAME E...) (index E IDX...) (array E...) (rowvec E...)
//   IDX      (at E) (range LO HI) (all)          LO, HI: an EXPR or _ (open)
//   TYPE     int | real;  BASE  s | v | r | m (scalar, vector, row_vector, matrix);  RANK  array dims
//   EXPORT   1: a transformed data declaration (added to the data); 0: a local of a block
//
// Values are stored column-major over their dims (array dims first, then the vector's length or
// the matrix's rows and columns), as fvi/data/dataset.h stores data. Every index is checked; an
// error names the statement's line in the model.
#include <string>

#include "fvi/data/dataset.h"

namespace fvi::data {

// Runs `program` over `data` (the party's own variables) and `public_data` (read only), adding
// each exported declaration to `data` with `source` "transformed data". Throws DataError naming
// the line of the model on an index out of range, sizes that do not agree, or a malformed program.
void compute_transformed_data(const std::string& program, DataSet& data, const DataSet& public_data);

// Whether the statements may call `name` (the functions compute_transformed_data implements); the
// compiler refuses others before any program is built.
bool transformed_data_function(const std::string& name);

}  // namespace fvi::data
