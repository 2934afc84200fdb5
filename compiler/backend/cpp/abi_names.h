#pragma once
// The kernel ABI's enumerators (runtime/include/fvi/kernel/abi.h) as C source spells them, for
// the C++ backend's tables: FVI_GROUP_GLOBAL, FVI_LOWER, FVI_SILO, ...
#include <cctype>
#include <string>

#include "fvi/kernel/abi.h"

namespace fvic::backend {

inline std::string group_constant(fvi_group kind) {
  std::string name = fvi_group_name(kind);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "FVI_GROUP_" + name;
}

inline const char* owner_name(fvi_owner o) {
  switch (o) {
    case FVI_SERVER: return "FVI_SERVER";
    case FVI_SILO: return "FVI_SILO";
    case FVI_SPLIT_SILO: return "FVI_SPLIT_SILO";
    case FVI_COUPLING: return "FVI_COUPLING";
  }
  return "FVI_SERVER";
}

inline const char* kind_name(fvi_factor_kind k) {
  switch (k) {
    case FVI_DENSITY: return "FVI_DENSITY";
    case FVI_LIKELIHOOD: return "FVI_LIKELIHOOD";
    case FVI_CONTRIBUTION: return "FVI_CONTRIBUTION";
    case FVI_ELEMENTS: return "FVI_ELEMENTS";
  }
  return "FVI_DENSITY";
}

inline const char* transform_name(fvi_transform transform) {
  switch (transform) {
    case FVI_IDENTITY: return "FVI_IDENTITY";
    case FVI_LOWER: return "FVI_LOWER";
    case FVI_UPPER: return "FVI_UPPER";
    case FVI_INTERVAL: return "FVI_INTERVAL";
    case FVI_ORDERED: return "FVI_ORDERED";
    case FVI_POSITIVE_ORDERED: return "FVI_POSITIVE_ORDERED";
    case FVI_SOFTMAX_SIMPLEX: return "FVI_SOFTMAX_SIMPLEX";
    case FVI_CHOLESKY_CORR: return "FVI_CHOLESKY_CORR";
    case FVI_CHOLESKY_COV: return "FVI_CHOLESKY_COV";
    case FVI_CORR_MATRIX: return "FVI_CORR_MATRIX";
    case FVI_COV_MATRIX: return "FVI_COV_MATRIX";
    case FVI_AFFINE: return "FVI_AFFINE";
    case FVI_UNIT_VECTOR: return "FVI_UNIT_VECTOR";
  }
  return "FVI_IDENTITY";
}

inline const char* party_name(fvi_data_party p) {
  switch (p) {
    case FVI_DATA_SERVER: return "FVI_DATA_SERVER";
    case FVI_DATA_SILO: return "FVI_DATA_SILO";
    case FVI_DATA_SPLIT: return "FVI_DATA_SPLIT";
    case FVI_DATA_PUBLIC: break;
  }
  return "FVI_DATA_PUBLIC";
}

inline const char* structure_name(fvi_vector_structure s) {
  switch (s) {
    case FVI_SIMPLEX: return "FVI_SIMPLEX";
    case FVI_ORDERED_VECTOR: return "FVI_ORDERED_VECTOR";
    case FVI_POSITIVE_ORDERED_VECTOR: return "FVI_POSITIVE_ORDERED_VECTOR";
    case FVI_PLAIN: break;
  }
  return "FVI_PLAIN";
}

}  // namespace fvic::backend
