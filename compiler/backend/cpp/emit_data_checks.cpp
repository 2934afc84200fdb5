#include "backend/cpp/emit_data_checks.h"

#include <string>
#include <vector>

#include "backend/abi_description.h"
#include "backend/cpp/abi_names.h"
#include "backend/cpp/c_string.h"

namespace fvic::backend {

void emit_data_table(const SemanticModel& model, const std::array<std::string, 3>& transformed_data, std::ostream& o) {
  o << "// The data each party must give, checked before inference starts (fvi/data/validate.h).\n";
  const DataTableDescription table = describe_data(model, transformed_data);
  const std::vector<DataDescription>& data = table.declarations;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i].dims.empty()) continue;
    o << "const char* const kDataDims" << i << "[] = {";
    for (size_t k = 0; k < data[i].dims.size(); ++k) o << (k ? ", " : "") << c_string(data[i].dims[k]);
    o << "};\n";
  }
  if (!data.empty()) {
    o << "const fvi_data_declaration kDataDeclarations[] = {\n";
    for (size_t i = 0; i < data.size(); ++i) {
      const DataDescription& d = data[i];
      o << "    {" << c_string(d.name) << ", " << party_name(d.party) << ", " << (d.is_int ? 1 : 0) << ", "
        << (d.row_vector ? 1 : 0) << ", " << structure_name(d.structure) << ", " << d.dims.size() << ", "
        << (d.dims.empty() ? "nullptr" : "kDataDims" + std::to_string(i)) << ", " << c_string(d.lower) << ", "
        << c_string(d.upper) << ",\n"
        << "     " << c_string(d.declaration) << ", " << d.line << "},\n";
    }
    o << "};\n";
  }
  if (!table.size_checks.empty()) {
    o << "const fvi_size_check kSizeChecks[] = {\n";
    for (const SizeCheckDescription& c : table.size_checks)
      o << "    {" << c_string(c.left) << ", " << c_string(c.right) << ", " << c_string(c.what) << ", " << c.line
        << "},\n";
    o << "};\n";
  }
  o << "const fvi_data_table kDataTable = {" << data.size() << ", " << (data.empty() ? "nullptr" : "kDataDeclarations")
    << ", " << table.size_checks.size() << ", " << (table.size_checks.empty() ? "nullptr" : "kSizeChecks") << ",\n    {";
  for (size_t p = 0; p < table.transformed_data.size(); ++p)
    o << (p ? ",\n     " : "") << c_string(table.transformed_data[p]);
  o << "}};\n\n";
}

}  // namespace fvic::backend
