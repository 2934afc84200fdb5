#pragma once
// The C++ backend (emit_cpp, emit.h) inside: the class Emitter, which writes one model's source,
// and the helpers its files share. Private to emit.cpp and the emit_*.cpp files, which define its
// members by concern, one file per section below. Nothing else includes this.
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/fuse.h"
#include "ir/ir.h"

namespace fvic::backend::emit_detail {

using ir::Node;
using ir::Op;
using ir::Slot;

// Data sizes become members named size_<name>; a size built from anything else cannot be spelt.
class SizeSpeller {
 public:
  std::string operator()(const SymSize& s);  // emit.cpp
  bool ok = true;
  std::string bad;
  std::set<std::string> used;
};

std::string number(double v);

std::string quoted(const std::string& s);

// The members are defined in the file named in each section's heading.
class Emitter {
 public:
  Emitter(const ir::Module& m, const SemanticModel& model) : m_(m), model_(model) {}

  bool run(std::string& out, std::string& error);

 private:
  // ---- the file's layout: emit.cpp ---------------------------------------------------------
  void sizes_struct(std::ostringstream& o);
  void programs(std::ostringstream& o);
  std::string group_index(fvi_group kind) const;

  // ---- kernel bodies: emit_kernels.cpp -----------------------------------------------------
  static std::string bound_rows(const ir::Factor& f, int k);
  static bool rows_read_in_place(const ir::Factor& f, int k);
  std::string ref(const ir::Factor& f, int k, bool meanfield) const;
  static std::map<std::string, std::string> hoisted_transforms(const std::vector<const ir::Factor*>& passes);
  void statements(std::ostringstream& o, const ir::Factor& f, int begin, int end, bool meanfield);
  void fused_chain(std::ostringstream& o, const ir::Factor& f, const FusedChain& chain, bool meanfield);
  static std::string rows_statement(const ir::Factor& f, size_t i, const std::string& vals);
  std::string statement(const ir::Factor& f, size_t i, bool meanfield = false);
  void factor(std::ostringstream& o, const ir::Factor& f, size_t index);
  void quantity(std::ostringstream& o, const ir::Factor& f);
  void bind_data(std::ostringstream& o, const ir::Factor& f);
  static void append_piece(std::string& list, const std::string& value, const std::string& offset);

  // ---- mean-field passes: emit_meanfield.cpp -----------------------------------------------
  static std::vector<size_t> inputs_of(const ir::Factor& mf, fvi_group group);
  std::string range_length(const ir::Factor& mf, size_t node, size_t slot);
  std::string ranges_of(const ir::Factor& mf, size_t slot);
  std::string compact_offset(const ir::Factor& mf, size_t node);
  void meanfield_passes(std::ostringstream& o, const ir::Factor& mf);

  // ---- the ABI tables: emit_abi_table.cpp --------------------------------------------------
  void abi(std::ostringstream& o);
  void quantity_table(std::ostringstream& o);
  size_t variable_table(std::ostringstream& o);

  const ir::Module& m_;
  const SemanticModel& model_;
  SizeSpeller sizes_;
};

}  // namespace fvic::backend::emit_detail
