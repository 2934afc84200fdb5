#pragma once
// Validation of a party's data against the model's declarations (fvi_data_table, emitted by
// fvic into every generated program) before inference starts. A generated program's main does:
//
//   fvi::data::DataDirectory dir = fvi::data::load_data_directory(args.data);
//   fvi::data::validate_or_throw(*model.data_table, dir);     // every problem, one per line
//   fvi::data::DataSet silo = std::move(dir.silos[k]).merged(dir.public_data);
//   model.create(factor, &silo.view(), &error);
//
// A program that reads one party (NAME-client, NAME-server, --test data) calls validate_party.
//
// What is checked, for every declaration of the party's block(s): the variable is there; its
// shape is the declared one (sizes evaluated from the data); an int's values are whole numbers;
// no value is NaN or infinite; every value is within its declared bounds (literals or data
// values such as K); a simplex sums to 1; and the size equalities the compiler could not decide.
// Each message names the file, the variable and what was expected, e.g.
//   data/silo-2.json: y[17] = 3 is outside its declared bounds [0, 1] (array[N] int<lower=0, upper=1> y)
//
// Validation also prepares the data for the kernels: a `row_vector` becomes 1 x n, and an int
// size missing from a CSV file or an .npy directory (N) is inferred from the dimension it gives
// an array of the same party read from such a file (the rows of x for `matrix[N, D] x`).
#include <cstddef>
#include <string>
#include <vector>

#include "fvi/data/dataset.h"
#include "fvi/data/readers.h"
#include "fvi/kernel/abi.h"

namespace fvi::data {

enum class Party { Public, Server, Silo };

struct Problems {
  std::vector<std::string> messages;  // at most `limit`
  size_t total = 0;                   // every problem found
  size_t limit = 50;

  void add(std::string message);
  bool empty() const { return total == 0; }
  // The messages one per line, then "... and N more problems" when some were left out.
  std::string text() const;
};

// Checks `own`, the data of one party (Public: data.json; Server: server.json; Silo: one silo's
// files, or --test data) against the declarations of that party's blocks (a silo holds `silo
// data` and `split data`); `public_data` is what its sizes and bounds may also refer to (ignored
// for Party::Public). Appends what it finds to `problems`. A variable declared in another party's
// block given here is a problem too (public data belongs in data.json); undeclared variables are
// ignored. Public data should be validated first: a silo's sizes read its values.
void validate_party(const fvi_data_table& table, Party party, DataSet& own, const DataSet& public_data,
                    Problems& problems);

// Every party of a data directory: data.json, server.json, then silo-1 ... silo-S.
Problems validate(const fvi_data_table& table, DataDirectory& dir, size_t limit = 50);
// The same; throws DataError holding every message when there is any problem.
void validate_or_throw(const fvi_data_table& table, DataDirectory& dir, size_t limit = 50);

}  // namespace fvi::data
