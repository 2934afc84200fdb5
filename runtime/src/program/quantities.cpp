#include "fvi/program/quantities.h"

#include <Eigen/Cholesky>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "fvi/engine/bound_factor.h"

namespace fvi::program {

namespace {

// A quantity's kernel state, destroyed with it.
struct QuantityState {
  const fvi_model& model;
  void* state = nullptr;
  QuantityState(const fvi_model& m, int factor, const fvi_data& data, const std::string& name) : model(m) {
    fvi_error error{};
    state = model.create(factor, &data, &error);
    if (!state) throw engine::ModelError("quantity " + name + ": " + error.message);
  }
  ~QuantityState() {
    if (state) model.destroy(state);
  }
  QuantityState(const QuantityState&) = delete;
  QuantityState& operator=(const QuantityState&) = delete;
};

// A quantity's bound, or NaN (nothing compares below or above it: not checked) when the data
// lacks the scalar it names.
double bound_of(const char* data_name, double literal, const fvi_data& data, const char* quantity) {
  try {
    return bound_value(data_name, literal, data, quantity);
  } catch (const std::runtime_error&) {
    return std::nan("");
  }
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

// "mu = 0.21, tau = 1.3" for draw s (scalars and the first elements of containers, 6 at most).
std::string draw_values(const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& constrained, Eigen::Index s) {
  std::string out;
  int shown = 0;
  for (const VariableLayout& v : layout) {
    const std::vector<std::string> names = element_names(v);
    for (size_t e = 0; e < names.size() && shown < 6; ++e, ++shown)
      out += (out.empty() ? "" : ", ") + names[e] + " = " + number(constrained(v.offset + int64_t(e), s));
  }
  return out;
}

// The declared bounds of quantity `info` (laid out as `v`), at every draw of `block` (Stan
// rejects such a draw; here it is reported): "" when all hold, else the first broken one.
// What a draw's matrix breaks of its declared structure, or "" (Stan's checks, with its constraint
// tolerance 1e-8): cholesky_factor_corr lower triangular with a positive diagonal and rows of unit
// length, cholesky_factor_cov lower triangular with a positive diagonal, corr_matrix and
// cov_matrix symmetric and positive definite, a corr_matrix's diagonal 1.
}  // namespace

std::string structure_violation(int transform, const Eigen::MatrixXd& m) {
  constexpr double kTolerance = 1e-8;
  const Eigen::Index n = m.rows();
  const char* name = transform == FVI_CHOLESKY_CORR ? "a cholesky_factor_corr"
                     : transform == FVI_CHOLESKY_COV ? "a cholesky_factor_cov"
                     : transform == FVI_CORR_MATRIX  ? "a corr_matrix"
                     : transform == FVI_UNIT_VECTOR  ? "a unit_vector"
                                                     : "a cov_matrix";
  auto at = [](Eigen::Index i, Eigen::Index j) { return "[" + std::to_string(i + 1) + "," + std::to_string(j + 1) + "]"; };
  if (!m.allFinite()) return std::string("holds a NaN or an infinity, so is not ") + name;
  if (transform == FVI_UNIT_VECTOR) {
    if (std::fabs(m.squaredNorm() - 1) > kTolerance)
      return "is not " + std::string(name) + ": its length is " + number(m.norm()) + ", not 1";
    return "";
  }
  if (transform == FVI_CHOLESKY_CORR || transform == FVI_CHOLESKY_COV) {
    for (Eigen::Index j = 1; j < m.cols(); ++j)
      for (Eigen::Index i = 0; i < std::min(j, n); ++i)
        if (m(i, j) != 0) return "is not " + std::string(name) + ": " + at(i, j) + " = " + number(m(i, j)) + " above the diagonal";
    for (Eigen::Index i = 0; i < std::min(n, m.cols()); ++i)
      if (!(m(i, i) > 0)) return "is not " + std::string(name) + ": its diagonal " + at(i, i) + " = " + number(m(i, i)) + " is not positive";
    if (transform == FVI_CHOLESKY_CORR)
      for (Eigen::Index i = 0; i < n; ++i)
        if (std::fabs(m.row(i).squaredNorm() - 1) > kTolerance)
          return "is not " + std::string(name) + ": row " + std::to_string(i + 1) + " has length " +
                 number(m.row(i).norm()) + ", not 1";
    return "";
  }
  if (m.rows() != m.cols()) return "is not " + std::string(name) + ": it is not square";
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = j + 1; i < n; ++i)
      if (std::fabs(m(i, j) - m(j, i)) > kTolerance * std::max(1.0, std::fabs(m(i, j))))
        return "is not " + std::string(name) + ": " + at(i, j) + " = " + number(m(i, j)) + " but " + at(j, i) + " = " +
               number(m(j, i)) + " (not symmetric)";
  if (transform == FVI_CORR_MATRIX)
    for (Eigen::Index i = 0; i < n; ++i)
      if (std::fabs(m(i, i) - 1) > kTolerance)
        return "is not " + std::string(name) + ": its diagonal " + at(i, i) + " = " + number(m(i, i)) + ", not 1";
  Eigen::LLT<Eigen::MatrixXd> llt(m);
  if (llt.info() != Eigen::Success) return "is not " + std::string(name) + ": it is not positive definite";
  return "";
}

namespace {

std::string bound_violation(const fvi_quantity_info& info, const VariableLayout& v, const Eigen::MatrixXd& block,
                            const fvi_data& data, const std::vector<VariableLayout>& named,
                            const Eigen::MatrixXd& named_values) {
  if ((info.transform >= FVI_CHOLESKY_CORR && info.transform <= FVI_COV_MATRIX && v.dims.size() == 2) ||
      (info.transform == FVI_UNIT_VECTOR && v.dims.size() == 1)) {
    long broken = 0;
    std::string first;
    for (Eigen::Index s = 0; s < block.cols(); ++s) {
      const Eigen::Map<const Eigen::MatrixXd> m(block.col(s).data(), v.dims[0], v.dims.size() == 2 ? v.dims[1] : 1);
      const std::string why = structure_violation(info.transform, m);
      if (why.empty()) continue;
      if (broken++ == 0)
        first = v.name + " at draw " + std::to_string(s + 1) + " (" + draw_values(named, named_values, s) + ") " + why;
    }
    if (broken == 0) return "";
    return std::string(info.block == FVI_GENERATED_QUANTITIES ? "generated quantity " : "transformed parameter ") +
           first + "; " + std::to_string(broken) + " of " + std::to_string(block.cols()) + " draws break it";
  }
  const Eigen::Index draws = block.cols();
  const int64_t elements = block.rows();
  const double lower = info.transform == FVI_LOWER || info.transform == FVI_INTERVAL
                           ? bound_of(info.lower_data, info.lower, data, info.name) : -INFINITY;
  const double upper = info.transform == FVI_UPPER || info.transform == FVI_INTERVAL
                           ? bound_of(info.upper_data, info.upper, data, info.name) : INFINITY;
  long broken = 0;
  std::string first;
  for (Eigen::Index s = 0; s < draws; ++s)
    for (int64_t e = 0; e < elements; ++e) {
      const double x = block(e, s);
      const bool below = x < lower, above = x > upper;
      if (!below && !above && !std::isnan(x)) continue;
      if (broken++ == 0) {
        const std::string element = element_names(v)[size_t(e)];
        first = element + " = " + number(x) + " at draw " + std::to_string(s + 1) + " (" +
                draw_values(named, named_values, s) + ") " +
                (std::isnan(x) ? std::string("is not a number")
                 : below        ? "is below its lower bound " + number(lower)
                                : "is above its upper bound " + number(upper));
      }
      break;
    }
  if (broken == 0) return "";
  return std::string(info.block == FVI_GENERATED_QUANTITIES ? "generated quantity " : "transformed parameter ") +
         first + "; " + std::to_string(broken) + " of " + std::to_string(draws) + " draws break it";
}

}  // namespace

void append_quantities(const QuantityDraws& q, std::vector<VariableLayout>& layout, Eigen::MatrixXd& values) {
  layout.insert(layout.end(), q.layout.begin(), q.layout.end());
  if (q.values.rows() == 0) return;
  values.conservativeResize(values.rows() + q.values.rows(), Eigen::NoChange);
  values.bottomRows(q.values.rows()) = q.values;
}

QuantityDraws evaluate_quantities(const fvi_model& model, int owner, const fvi_data& data, const GroupDraws& groups,
                                  const std::vector<VariableLayout>& named, const Eigen::MatrixXd& named_values,
                                  int64_t first_offset, uint64_t noise_key, std::vector<std::string>& skipped,
                                  bool silo_sum_parts) {
  QuantityDraws out;
  const Eigen::Index draws = named_values.cols();
  std::vector<Eigen::MatrixXd> blocks;
  int64_t offset = first_offset;
  for (int q = 0; q < model.quantity_count; ++q) {
    const fvi_quantity_info& info = model.quantities[q];
    if (info.owner != owner || (info.aggregate != 0) != silo_sum_parts) continue;
    std::vector<fvi_tensor> inputs;
    std::string missing;
    for (int g = 0; g < info.group_count; ++g) {
      const int kind = engine::group_kind(model, info.groups[g]);
      const std::string group = fvi_group_name(kind);
      auto it = kind < 0 ? groups.end() : groups.find(fvi_group(kind));
      if (it == groups.end()) {
        missing = group;
        break;
      }
      const Eigen::MatrixXd& v = it->second;
      if (v.cols() != 1 && v.cols() != draws)
        throw engine::ModelError("quantity " + std::string(info.name) + ": the " + group + " group has " +
                                 std::to_string(v.cols()) + " draws, not " + std::to_string(draws));
      inputs.push_back({const_cast<double*>(v.data()), v.rows(), 1, v.cols()});
    }
    if (!missing.empty()) {
      skipped.push_back(std::string(info.name) + " (it reads the " + missing + " group, not kept at the draws)");
      continue;
    }
    QuantityState state(model, info.factor, data, info.name);
    fvi_tensor value{};
    fvi_error error{};
    // Each quantity's own key: its random draws do not follow another quantity's.
    const uint64_t key = noise_key ^ (0x9E3779B97F4A7C15ull * uint64_t(q + 1));
    if (model.forward_quantity(state.state, inputs.data(), draws, key, &value, &error) != 0)
      throw engine::ModelError("quantity " + std::string(info.name) + ": " + error.message);
    // rows x (cols * S), draw s in columns [s*cols, (s+1)*cols): one column of elements per draw.
    const int64_t elements = value.rows * value.cols;
    Eigen::MatrixXd block(elements, draws);
    for (Eigen::Index s = 0; s < draws; ++s) {
      const int64_t source = value.draws == 1 ? 0 : s;  // a constant quantity has one draw
      for (int64_t e = 0; e < elements; ++e) block(e, s) = value.data[source * elements + e];
    }
    VariableLayout v;
    v.name = info.name;
    v.offset = offset;
    if (info.rank >= 1) v.dims.push_back(value.rows == 1 && info.rank == 1 ? value.cols : value.rows);
    if (info.rank >= 2) v.dims.push_back(value.cols);
    out.layout.push_back(v);
    offset += elements;

    const std::string broken = bound_violation(info, v, block, data, named, named_values);
    if (!broken.empty()) out.violations.push_back(broken);
    blocks.push_back(std::move(block));
  }
  out.values.resize(offset - first_offset, draws);
  int64_t row = 0;
  for (const Eigen::MatrixXd& b : blocks) {
    out.values.middleRows(row, b.rows()) = b;
    row += b.rows();
  }
  return out;
}

int silo_sum_count(const fvi_model& model) {
  int count = 0;
  for (int q = 0; q < model.quantity_count; ++q) count += model.quantities[q].aggregate != 0;
  return count;
}

Eigen::MatrixXd silo_sum_parts(const fvi_model& model, const fvi_data& data, int silo, const GroupDraws& groups,
                               uint64_t seed, Eigen::Index draws) {
  const int count = silo_sum_count(model);
  Eigen::MatrixXd parts = Eigen::MatrixXd::Constant(count, draws, std::nan(""));
  if (count == 0) return parts;
  std::vector<std::string> skipped;
  const Eigen::MatrixXd none(0, draws);
  const uint64_t key = seed ^ (0xD1B54A32D192ED03ull * uint64_t(silo));
  const QuantityDraws q = evaluate_quantities(model, FVI_SILO, data, groups, {}, none, 0, key, skipped, true);
  // Rows in quantity order; one the silo could not compute stays NaN.
  int row = 0;
  size_t computed = 0;
  for (int i = 0; i < model.quantity_count; ++i) {
    if (!model.quantities[i].aggregate) continue;
    if (computed < q.layout.size() && q.layout[computed].name == model.quantities[i].name) {
      const VariableLayout& v = q.layout[computed++];
      if (v.dims.empty()) parts.row(row) = q.values.row(v.offset);
    }
    ++row;
  }
  for (const std::string& name : skipped) std::fprintf(stderr, "note: silo %d: %s is not computed yet\n", silo, name.c_str());
  return parts;
}

void append_parts(const Eigen::MatrixXd& parts, std::vector<double>& reply) {
  for (Eigen::Index i = 0; i < parts.rows(); ++i)
    for (Eigen::Index s = 0; s < parts.cols(); ++s) reply.push_back(parts(i, s));
}

void add_parts(const double* parts, Eigen::MatrixXd& sums) {
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  sums += Eigen::Map<const RowMajor>(parts, sums.rows(), sums.cols());
}

QuantityDraws silo_sums(const fvi_model& model, const fvi_data& data, const Eigen::MatrixXd& sums,
                        const std::vector<VariableLayout>& named, const Eigen::MatrixXd& named_values,
                        int64_t first_offset) {
  QuantityDraws out;
  out.values = sums;
  int row = 0;
  for (int i = 0; i < model.quantity_count; ++i) {
    const fvi_quantity_info& info = model.quantities[i];
    if (!info.aggregate) continue;
    VariableLayout v;
    v.name = info.name;
    v.offset = first_offset + row;
    if (sums.row(row).hasNaN()) {
      std::fprintf(stderr, "note: %s is not computed: a silo could not compute its part at every draw\n", info.name);
    } else {
      const std::string broken = bound_violation(info, v, sums.middleRows(row, 1), data, named, named_values);
      if (!broken.empty()) out.violations.push_back(broken);
    }
    out.layout.push_back(v);
    ++row;
  }
  if (row != sums.rows())
    throw engine::ModelError("the silos sent " + std::to_string(sums.rows()) + " sums, the model has " +
                             std::to_string(row));
  return out;
}

void add_silo_quantities(const fvi_model& model, const fvi_data& data, int silo, const GroupDraws& groups,
                         uint64_t seed, std::vector<VariableLayout>& layout, Eigen::MatrixXd& values, int owner) {
  std::vector<std::string> skipped;
  const uint64_t key = seed ^ (0xD1B54A32D192ED03ull * uint64_t(silo));
  const QuantityDraws q = evaluate_quantities(model, owner, data, groups, layout, values, values.rows(), key, skipped);
  append_quantities(q, layout, values);
  for (const std::string& v : q.violations) std::fprintf(stderr, "error: silo %d: %s\n", silo, v.c_str());
  for (const std::string& name : skipped) std::fprintf(stderr, "note: silo %d: %s is not computed yet\n", silo, name.c_str());
}

}  // namespace fvi::program
