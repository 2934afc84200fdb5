// Checks each party's data against the model's declarations (fvi_data_table) before inference.
#include "fvi/data/validate.h"

#include "fvi/data/transformed_data.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <set>

#include "fvi/data/expression.h"

namespace fvi::data {

void Problems::add(std::string message) {
  ++total;
  if (messages.size() < limit) messages.push_back(std::move(message));
}

std::string Problems::text() const {
  std::string out;
  for (const std::string& m : messages) out += (out.empty() ? "" : "\n") + m;
  if (total > messages.size())
    out += "\n... and " + std::to_string(total - messages.size()) + " more problems (the first " +
           std::to_string(messages.size()) + " are shown)";
  return out;
}

namespace {

const char* block_name(int party) {
  switch (party) {
    case FVI_DATA_PUBLIC: return "data";
    case FVI_DATA_SERVER: return "server data";
    case FVI_DATA_SILO: return "silo data";
    default: return "split data";
  }
}

const char* home_of(int party) {
  switch (party) {
    case FVI_DATA_PUBLIC: return "data.json";
    case FVI_DATA_SERVER: return "server.json";
    default: return "each silo's own files (silo-K.json)";
  }
}

bool belongs(int declared, Party party) {
  switch (party) {
    case Party::Public: return declared == FVI_DATA_PUBLIC;
    case Party::Server: return declared == FVI_DATA_SERVER;
    case Party::Silo: return declared == FVI_DATA_SILO || declared == FVI_DATA_SPLIT;
  }
  return false;
}

// The shortest spelling that reads back as the same double: 3, 0.5, 1e+300, NaN, inf.
std::string fmt(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string list_string(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + "]";
}

std::string dims_string(const std::vector<int64_t>& dims) {
  if (dims.empty()) return "a scalar";
  std::vector<std::string> items;
  for (int64_t d : dims) items.push_back(std::to_string(d));
  return list_string(items);
}

// y[17], x[3, 2] (1-based) for the k-th stored element (column-major over dims); N for a scalar.
std::string element_name(const Variable& v, int64_t k) {
  if (v.dims.empty()) return v.name;
  std::string s = v.name + "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    const int64_t d = std::max<int64_t>(1, v.dims[i]);
    s += (i ? ", " : "") + std::to_string(k % d + 1);
    k /= d;
  }
  return s + "]";
}

bool is_whole(double x) { return std::isfinite(x) && std::floor(x) == x; }

bool inferable_source(const std::string& source) {
  auto ends = [&](const char* e) {
    const std::string s = e;
    return source.size() >= s.size() && source.compare(source.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".csv") || ends(".npy");
}

class PartyValidator {
 public:
  PartyValidator(const fvi_data_table& table, Party party, DataSet& own, const DataSet* pub, Problems& problems)
      : t_(table), party_(party), own_(own), pub_(pub), problems_(problems) {}

  void run() {
    foreign_variables();
    infer_sizes();
    for (int i = 0; i < t_.declaration_count; ++i)
      if (belongs(t_.declarations[i].party, party_)) declaration(t_.declarations[i]);
    size_checks();
  }

 private:
  const fvi_data_declaration* declared(const std::string& name) const {
    for (int i = 0; i < t_.declaration_count; ++i)
      if (name == t_.declarations[i].name) return &t_.declarations[i];
    return nullptr;
  }

  const Variable* lookup(const std::string& name) const {
    if (const Variable* v = own_.find(name)) return v;
    return pub_ ? pub_->find(name) : nullptr;
  }

  // A data scalar's value for a size or bound; nullopt when absent, not a scalar, or rejected.
  std::optional<Number> value_of(const std::string& name) const {
    if (bad_.count(name)) return std::nullopt;
    const Variable* v = lookup(name);
    if (!v || !v->dims.empty() || v->size() != 1 || !std::isfinite(v->values[0])) return std::nullopt;
    const fvi_data_declaration* d = declared(name);
    if (d && d->is_int && !is_whole(v->values[0])) return std::nullopt;
    return Number{v->values[0], d ? d->is_int != 0 : is_whole(v->values[0])};
  }

  std::optional<Number> evaluate_here(const char* expr) const {
    return evaluate(expr ? expr : "", [this](const std::string& n) { return value_of(n); });
  }

  // "1", or "K = 3" for an expression over data.
  std::string spelled(const char* expr, double value) const {
    if (expression_names(expr).empty()) return fmt(value);
    return std::string(expr) + " = " + fmt(value);
  }

  // Public data given to a silo, silo data in data.json, ...: each belongs in one place.
  void foreign_variables() {
    for (const Variable& v : own_.variables()) {
      const fvi_data_declaration* d = declared(v.name);
      if (!d || belongs(d->party, party_)) continue;
      problems_.add(v.source + ": " + v.name + " is declared in the `" + block_name(d->party) +
                    "` block (line " + std::to_string(d->line) + "): give it in " + home_of(d->party) +
                    ", not here");
      bad_.insert(v.name);
    }
  }

  // An int size left out of a CSV file or an .npy directory, given by the dimension it names in
  // an array of this party read from such a file.
  void infer_sizes() {
    for (int i = 0; i < t_.declaration_count; ++i) {
      const fvi_data_declaration& d = t_.declarations[i];
      if (!belongs(d.party, party_) || !d.is_int || d.rank != 0 || own_.has(d.name)) continue;
      struct Found {
        int64_t value;
        std::string what, source;
      };
      std::vector<Found> found;
      for (int j = 0; j < t_.declaration_count; ++j) {
        const fvi_data_declaration& e = t_.declarations[j];
        const Variable* v = own_.find(e.name);
        if (!belongs(e.party, party_) || !v || !inferable_source(v->source)) continue;
        if (static_cast<int>(v->dims.size()) != e.rank) continue;
        for (int k = 0; k < e.rank; ++k)
          if (e.dims[k] && std::string(e.dims[k]) == d.name)
            found.push_back({v->dims[k],
                             "dimension " + std::to_string(k + 1) + " of " + e.name + " in " + v->source + " is " +
                                 std::to_string(v->dims[k]),
                             v->source});
      }
      if (found.empty()) continue;
      bool agree = true;
      for (const Found& f : found) agree = agree && f.value == found[0].value;
      if (!agree) {
        std::string what;
        for (const Found& f : found) what += (what.empty() ? "" : ", ") + f.what;
        problems_.add(own_.where() + ": " + d.name + " is missing, and the arrays that would give it disagree: " + what);
        bad_.insert(d.name);
        continue;
      }
      Variable v;
      v.name = d.name;
      v.values = {static_cast<double>(found[0].value)};
      v.source = found[0].source;
      v.set_dims({});
      own_.add(std::move(v));
    }
  }

  void declaration(const fvi_data_declaration& d) {
    const std::string name = d.name;
    if (bad_.count(name)) return;  // already reported
    const Variable* v = own_.find(name);
    if (!v) {
      problems_.add(own_.where() + ": " + name + " is missing (" + d.declaration + ", declared in the `" +
                    block_name(d.party) + "` block at line " + std::to_string(d.line) + ")");
      bad_.insert(name);
      return;
    }
    if (!shape(d, *v)) {
      bad_.insert(name);
      return;
    }
    v = own_.find(name);  // shape() may have reshaped it
    if (!elements(d, *v)) bad_.insert(name);
  }

  // Checks the dims and gives the value the kernels' layout. False when they do not match.
  bool shape(const fvi_data_declaration& d, const Variable& v) {
    std::vector<std::optional<int64_t>> want(static_cast<size_t>(d.rank));
    std::vector<std::string> exprs, values;
    bool all_known = true, all_literal = true;
    int64_t product = 1;
    for (int k = 0; k < d.rank; ++k) {
      const char* e = d.dims[k] ? d.dims[k] : "";
      std::optional<Number> n = evaluate_here(e);
      if (n && n->integer && n->value >= 0 && n->value < 9.0e15) want[k] = static_cast<int64_t>(n->value);
      all_known = all_known && want[k].has_value();
      all_literal = all_literal && expression_names(e).empty();
      exprs.push_back(*e ? e : "?");
      values.push_back(want[k] ? std::to_string(*want[k]) : "?");
      // Saturating: 2^32 x 2^32 must not wrap to 0 and pass for an empty list (issue 27 item 2).
      if (want[k] && __builtin_mul_overflow(product, *want[k], &product)) product = INT64_MAX;
    }
    bool ok = static_cast<int>(v.dims.size()) == d.rank;
    for (int k = 0; ok && k < d.rank; ++k) ok = !want[k] || *want[k] == v.dims[k];
    // An empty list stands for any empty array ([] for matrix[0, D]), as in Stan's JSON.
    const bool empty_ok = !ok && v.size() == 0 && all_known && product == 0;
    if (!ok && !empty_ok) {
      std::string expected = d.rank == 0 ? std::string("a scalar")
                             : all_literal ? list_string(values)
                                           : list_string(exprs) + " = " + list_string(values);
      problems_.add(v.source + ": " + v.name + " is " +
                    (v.dims.empty() ? std::string("a scalar") : "of shape " + dims_string(v.dims)) + ", but " +
                    d.declaration + " is " + (d.rank == 0 ? expected : "of shape " + expected));
      return false;
    }
    std::vector<int64_t> dims = v.dims;
    if (empty_ok) {
      dims.clear();
      for (const std::optional<int64_t>& w : want) dims.push_back(*w);
    }
    int64_t rows = dims.empty() ? 1 : dims[0], cols = 1;
    for (size_t k = 1; k < dims.size(); ++k)
      if (__builtin_mul_overflow(cols, dims[k], &cols)) {
        problems_.add(v.source + ": " + v.name + ": " + d.declaration + " has more elements per row than fit 64 bits");
        return false;
      }
    if (d.row_vector && d.rank == 1) std::swap(rows, cols);
    own_.reshape(v.name, dims, rows, cols);
    return true;
  }

  // Types, finiteness, bounds and simplex sums. False when a value is rejected.
  bool elements(const fvi_data_declaration& d, const Variable& v) {
    const char* lower_expr = d.lower ? d.lower : "";
    const char* upper_expr = d.upper ? d.upper : "";
    if (d.structure == FVI_SIMPLEX && !*lower_expr) lower_expr = "0";
    if (d.structure == FVI_SIMPLEX && !*upper_expr) upper_expr = "1";
    const std::optional<Number> lo = evaluate_here(lower_expr), hi = evaluate_here(upper_expr);
    const bool has_lo = lo && !std::isnan(lo->value), has_hi = hi && !std::isnan(hi->value);

    struct Count {
      int64_t n = 0, first = -1;
      void hit(int64_t k) {
        if (n++ == 0) first = k;
      }
    } nonfinite, fraction, outside;
    for (int64_t k = 0; k < v.size(); ++k) {
      const double x = v.values[static_cast<size_t>(k)];
      if (!std::isfinite(x)) {
        nonfinite.hit(k);
        continue;
      }
      if (d.is_int && std::floor(x) != x) fraction.hit(k);
      if ((has_lo && x < lo->value) || (has_hi && x > hi->value)) outside.hit(k);
    }
    const std::string decl = std::string(" (") + d.declaration + ")";
    auto more = [&](const Count& c) {
      if (c.n <= 1) return std::string();
      return "; so are " + std::to_string(c.n - 1) + " more of its values";
    };
    auto value = [&](const Count& c) { return v.values[static_cast<size_t>(c.first)]; };
    if (nonfinite.n)
      problems_.add(v.source + ": " + element_name(v, nonfinite.first) + " is " + fmt(value(nonfinite)) +
                    "; data must be finite" + decl + more(nonfinite));
    if (fraction.n)
      problems_.add(v.source + ": " + element_name(v, fraction.first) + " = " + fmt(value(fraction)) +
                    " is not an integer" + decl + more(fraction));
    if (outside.n) {
      std::string what;
      if (has_lo && has_hi)
        what = "is outside its declared bounds [" + spelled(lower_expr, lo->value) + ", " +
               spelled(upper_expr, hi->value) + "]";
      else if (has_lo)
        what = "is below its declared lower bound " + spelled(lower_expr, lo->value);
      else
        what = "is above its declared upper bound " + spelled(upper_expr, hi->value);
      problems_.add(v.source + ": " + element_name(v, outside.first) + " = " + fmt(value(outside)) + " " + what + decl +
                    more(outside));
    }
    if (nonfinite.n || fraction.n || outside.n) return false;
    if (d.structure == FVI_SIMPLEX && v.size() > 0) {
      double sum = 0;
      for (double x : v.values) sum += x;
      if (std::fabs(sum - 1) > 1e-8) {
        problems_.add(v.source + ": " + v.name + " sums to " + fmt(sum) + ", but a simplex sums to 1 (within 1e-8)" +
                      decl);
        return false;
      }
    }
    if (d.structure == FVI_ORDERED_VECTOR || d.structure == FVI_POSITIVE_ORDERED_VECTOR) {
      // One vector (the checker refuses arrays of them): Stan's check_ordered / check_positive_ordered.
      if (d.structure == FVI_POSITIVE_ORDERED_VECTOR && v.size() > 0 && v.values[0] < 0) {
        problems_.add(v.source + ": " + v.name + "[1] = " + fmt(v.values[0]) +
                      " is negative, but a positive_ordered vector starts at 0 or above" + decl);
        return false;
      }
      for (size_t i = 1; i < v.values.size(); ++i)
        if (!(v.values[i] > v.values[i - 1])) {
          problems_.add(v.source + ": " + v.name + "[" + std::to_string(i + 1) + "] = " + fmt(v.values[i]) +
                        " is not above " + v.name + "[" + std::to_string(i) + "] = " + fmt(v.values[i - 1]) +
                        ", but an ordered vector increases strictly" + decl);
          return false;
        }
    }
    return true;
  }

  // The size equalities the compiler left to the data. Each is checked by the party that holds
  // one of its sizes (public ones once, with the public data).
  void size_checks() {
    for (int i = 0; i < t_.size_check_count; ++i) {
      const fvi_size_check& c = t_.size_checks[i];
      std::vector<std::string> names = expression_names(c.left);
      for (const std::string& n : expression_names(c.right)) names.push_back(n);
      bool mine = party_ == Party::Public;
      std::set<std::string> files;
      for (const std::string& n : names) {
        const Variable* v = lookup(n);
        if (!v) continue;
        mine = mine || own_.find(n) != nullptr;
        files.insert(v->source);
      }
      if (!mine) continue;
      const std::optional<Number> l = evaluate_here(c.left), r = evaluate_here(c.right);
      if (!l || !r || l->value == r->value) continue;
      std::string where;
      for (const std::string& f : files) where += (where.empty() ? "" : ", ") + f;
      problems_.add(where + ": " + spelled(c.left, l->value) + " and " + spelled(c.right, r->value) +
                    " must be equal: " + c.what + " (line " + std::to_string(c.line) + " of the model)");
    }
  }

  const fvi_data_table& t_;
  Party party_;
  DataSet& own_;
  const DataSet* pub_;
  Problems& problems_;
  std::set<std::string> bad_;  // reported: not used for sizes and bounds
};

}  // namespace

void validate_party(const fvi_data_table& table, Party party, DataSet& own, const DataSet& public_data,
                    Problems& problems) {
  const size_t before = problems.total;
  PartyValidator(table, party, own, party == Party::Public ? nullptr : &public_data, problems).run();
  // The party's transformed data built by statements, from data now known to be as declared.
  const int index = party == Party::Public ? FVI_DATA_PUBLIC : party == Party::Server ? FVI_DATA_SERVER : FVI_DATA_SILO;
  const char* program = table.transformed_data[index];
  if (problems.total != before || !program || !*program) return;
  try {
    compute_transformed_data(program, own, public_data);
  } catch (const DataError& e) {
    problems.add(own.where() + ": " + e.what());
  }
}

Problems validate(const fvi_data_table& table, DataDirectory& dir, size_t limit) {
  Problems problems;
  problems.limit = limit;
  validate_party(table, Party::Public, dir.public_data, dir.public_data, problems);
  validate_party(table, Party::Server, dir.server, dir.public_data, problems);
  for (DataSet& silo : dir.silos) validate_party(table, Party::Silo, silo, dir.public_data, problems);
  return problems;
}

void validate_or_throw(const fvi_data_table& table, DataDirectory& dir, size_t limit) {
  const Problems problems = validate(table, dir, limit);
  if (!problems.empty()) throw DataError(problems.text());
}

}  // namespace fvi::data
