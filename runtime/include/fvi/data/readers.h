#pragma once
// Reading data files (docs/user-guide.md, "Data files"): Stan's JSON data format, CSV with one
// column per variable, and NumPy .npy files. Every reader throws fvi::data::DataError with a
// message that starts with the file's path and says what is wrong; none trusts its input (sizes
// in a header are checked against the bytes that are there).
#include <cstddef>
#include <string>

#include "fvi/data/dataset.h"

namespace fvi::data {

// Stan JSON: an object whose members are numbers (scalars), lists of numbers, or equal-length
// nested lists (a matrix or an array is a list of rows). "NaN", "Inf", "-Inf", "+Inf",
// "Infinity" and "-Infinity" (strings) are read as such so that validation can name them.
DataSet read_json(const std::string& path);
DataSet parse_json(const std::string& text, const std::string& source);

// CSV: a header of column names, then one row per observation. A column `y` is the vector y (one
// value per row); columns `x.1`, ..., `x.C` are the columns of the matrix x (rows x C), and
// `x.j.k` the elements [., j, k] of a three-dimensional array. Every column of a variable must
// be there. Fields may be quoted; lines starting with '#' and empty lines are skipped.
DataSet read_csv(const std::string& path);
DataSet parse_csv(const std::string& text, const std::string& source);

// NumPy .npy, format versions 1.0, 2.0 and 3.0; dtypes <f8 <f4 |u1 |i1 <i2 <u2 <i4 <u4 <i8 <u8
// |b1 (bool as 0/1); C or Fortran order; 0-d, 1-d and 2-d arrays. The variable is `name`.
// read_npy reads the header, checks the file's size against the shape, then reads the data in
// one read and converts it in one pass.
Variable read_npy(const std::string& path, const std::string& name);
Variable parse_npy(const char* bytes, size_t size, const std::string& name, const std::string& source);
// Every `NAME.npy` in `dir` as variable NAME (other files are ignored).
DataSet read_npy_directory(const std::string& dir);

// One party's data in `dir`: STEM.json, STEM.csv and the directory STEM/ of .npy files, whichever
// exist, together (a variable given twice is an error naming both files). When none exists the
// result is empty and names STEM.json as the file expected.
DataSet load_party(const std::string& dir, const std::string& stem);

// The data directory of DESIGN.md §5: data.json (public data), server.json (server data), and
// silo-1 ... silo-S (each in any of the forms load_party reads). The silos are the silo-K
// entries; they must be numbered 1..S without a gap.
struct DataDirectory {
  std::string dir;
  DataSet public_data, server;
  std::vector<DataSet> silos;  // silos[k] is silo k + 1
};
DataDirectory load_data_directory(const std::string& dir);

// The data of a pooled model (one that declares no silo data): `path` is a data directory with
// data.json (and server.json) and no silo-K entries, or one .json or .csv file, as a Stan user
// has it, read as data.json. The result has one silo, with no data of its own.
DataDirectory load_pooled_data(const std::string& path);

// The number of silos in `dir` (the silo-K entries, checked to be 1..S without a gap), for a
// program that reads only some parties (NAME-server reads data.json and server.json).
int count_silos(const std::string& dir);

// Held-out data (`--test PATH`): a .json or .csv file, or a directory of .npy files, read with
// its companions of the same stem (test.json beside test.csv or test/) as one silo's data.
DataSet load_test_data(const std::string& path);

}  // namespace fvi::data
