// CSV data: one column per variable (x.1, x.2, ... for a matrix's columns), one row per observation.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

#include "fvi/data/readers.h"
#include "file_util.h"

namespace fvi::data {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

// The fields of one line, split at commas outside double quotes, trimmed and unquoted.
bool split_fields(const std::string& line, std::vector<std::string>& out) {
  out.clear();
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(trim(field));
      field.clear();
    } else {
      field += c;
    }
  }
  out.push_back(trim(field));
  return !quoted;
}

struct Column {
  std::string base;
  std::vector<int64_t> index;  // x.2.3 -> {2, 3}; empty for a plain name
};

bool parse_column(const std::string& name, Column& c) {
  const size_t dot = name.find('.');
  c.base = name.substr(0, dot);
  c.index.clear();
  if (c.base.empty()) return false;
  if (dot == std::string::npos) return true;
  size_t pos = dot;
  while (pos != std::string::npos) {
    const size_t next = name.find('.', pos + 1);
    const std::string part = name.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || v < 1 || v > (int64_t(1) << 31))
      return false;
    c.index.push_back(v);
    pos = next;
  }
  return true;
}

std::string column_name(const std::string& base, const std::vector<int64_t>& index) {
  std::string s = base;
  for (int64_t i : index) s += "." + std::to_string(i);
  return s;
}

// One variable's columns: which CSV column holds each of its (flattened) trailing indices.
struct Group {
  std::vector<int64_t> extents;           // J, K, ... (empty for a plain column)
  std::map<std::vector<int64_t>, size_t> columns;  // index -> CSV column
  size_t first = 0;
};

}  // namespace

DataSet parse_csv(const std::string& text, const std::string& source) {
  std::vector<std::string> header, fields;
  std::vector<std::vector<double>> data;
  size_t line_no = 0, begin = 0;
  bool have_header = false;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (!split_fields(line, fields))
      throw DataError(source + ": line " + std::to_string(line_no) + " has an unterminated quote");
    if (!have_header) {
      header = fields;
      have_header = true;
      data.assign(header.size(), {});
      continue;
    }
    if (fields.size() != header.size())
      throw DataError(source + ": line " + std::to_string(line_no) + " has " + std::to_string(fields.size()) +
                      " fields, the header has " + std::to_string(header.size()));
    for (size_t c = 0; c < fields.size(); ++c) {
      const std::string& f = fields[c];
      const char* p = f.data();
      const char* e = f.data() + f.size();
      if (p != e && *p == '+') ++p;
      double v = 0;
      const auto [ptr, ec] = std::from_chars(p, e, v);
      if (f.empty())
        throw DataError(source + ": line " + std::to_string(line_no) + ", column " + header[c] + " is empty");
      if (ec == std::errc::result_out_of_range)  // beyond a double: an overflow to +-inf or underflow to 0
        v = std::strtod(std::string(p, e).c_str(), nullptr);
      else if (ec != std::errc() || ptr != e)
        throw DataError(source + ": line " + std::to_string(line_no) + ", column " + header[c] + ": '" +
                        f.substr(0, 40) + "' is not a number");
      data[c].push_back(v);
    }
  }
  if (!have_header) throw DataError(source + ": empty (a CSV data file needs a header of column names)");

  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (size_t c = 0; c < header.size(); ++c) {
    Column col;
    if (!parse_column(header[c], col))
      throw DataError(source + ": column '" + header[c] + "' is not a variable's name, nor NAME.1, NAME.2, ... " +
                      "for the columns of a matrix");
    auto [it, fresh] = groups.try_emplace(col.base);
    Group& g = it->second;
    if (fresh) order.push_back(col.base), g.first = c;
    if (!fresh && g.extents.size() != col.index.size())
      throw DataError(source + ": columns '" + header[g.first] + "' and '" + header[c] +
                      "' do not agree on how many indices " + col.base + " has");
    if (!g.columns.emplace(col.index, c).second)
      throw DataError(source + ": column '" + header[c] + "' appears twice");
    g.extents.resize(col.index.size(), 0);
    for (size_t k = 0; k < col.index.size(); ++k) g.extents[k] = std::max(g.extents[k], col.index[k]);
  }

  const int64_t rows = data.empty() ? 0 : static_cast<int64_t>(data[0].size());
  DataSet out;
  for (const std::string& base : order) {
    const Group& g = groups[base];
    int64_t width = 1;
    for (int64_t e : g.extents)
      if ((width *= e) > static_cast<int64_t>(g.columns.size())) break;  // some are missing; no overflow
    if (width != static_cast<int64_t>(g.columns.size())) {
      // The first index in column-major order without a column.
      std::vector<int64_t> at(g.extents.size(), 1);
      for (int64_t n = 0; n < width && g.columns.count(at); ++n)
        for (size_t k = 0; k < at.size() && ++at[k] > g.extents[k]; ++k) at[k] = 1;
      throw DataError(source + ": column '" + column_name(base, at) + "' is missing: " + base + " has columns up to '" +
                      column_name(base, g.extents) + "', and every one must be there");
    }
    Variable v;
    v.name = base;
    v.source = source;
    v.values.resize(static_cast<size_t>(rows * width));
    std::vector<int64_t> at(g.extents.size(), 1);
    for (int64_t col = 0; col < width; ++col) {
      const std::vector<double>& src = data[g.columns.at(at)];
      std::copy(src.begin(), src.end(), v.values.begin() + col * rows);
      for (size_t k = 0; k < at.size() && ++at[k] > g.extents[k]; ++k) at[k] = 1;
    }
    std::vector<int64_t> dims{rows};
    dims.insert(dims.end(), g.extents.begin(), g.extents.end());
    v.set_dims(std::move(dims));
    out.add(std::move(v));
  }
  return out;
}

DataSet read_csv(const std::string& path) {
  DataSet out = parse_csv(read_whole_file(path), path);
  out.add_file(path);
  return out;
}

}  // namespace fvi::data
