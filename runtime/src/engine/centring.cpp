#include "fvi/engine/centring.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "fvi/engine/bound_factor.h"

namespace fvi::engine {

namespace {

// Intercept i's marked products, (x, W's index), the first first: one before FVI_ABI_VERSION 14.
std::vector<std::pair<const char*, int>> marked_products(const fvi_model& model, int i) {
  const fvi_variable_info& b = model.variables[i];
  std::vector<std::pair<const char*, int>> out;
  if (!b.centring_data || !*b.centring_data) return out;
  out.push_back({b.centring_data, b.centring_coefficient});
  if (model.abi_version >= 14 && b.centring_more > 0 && b.centring_more_data && b.centring_more_coefficients)
    for (int j = 0; j < b.centring_more; ++j) out.push_back({b.centring_more_data[j], b.centring_more_coefficients[j]});
  return out;
}

// The marked intercepts of `intercept_group` (its values `intercept_dim`) whose coefficient is in
// `coefficient_group` (its values `coefficient_dim`), one block per product (`b + x * W + v * c`:
// two, whose shifts add): b a real with W a real or vector[D]; b a row_vector[K] with W a
// matrix[D, K]; b a vector[G] of groups' intercepts with W a real or vector[D] (rank 1 with a W
// of rank below 2).
std::vector<CentringBlock> marked_blocks(const fvi_model& model, const fvi_data& data, fvi_group intercept_group,
                                         Eigen::Index intercept_dim, fvi_group coefficient_group,
                                         Eigen::Index coefficient_dim) {
  std::vector<CentringBlock> blocks;
  if (model.abi_version < 13) return blocks;
  // An intercept whose companion cannot be taken (a mark this engine does not read) is left
  // uncentred, all of its products: centring x alone would shift its other sums with nothing to
  // undo it.
  std::vector<std::string> refused;
  for (int i = 0; i < model.variable_count; ++i)
    for (const auto& [x, w_index] : marked_products(model, i)) {
      const fvi_variable_info& b = model.variables[i];
      if (!x || !*x || w_index < 0 || w_index >= model.variable_count) continue;
      const fvi_variable_info& w = model.variables[w_index];
      if (group_kind(model, b.group) != intercept_group || group_kind(model, w.group) != coefficient_group ||
          b.transform != FVI_IDENTITY || w.transform != FVI_IDENTITY)
        continue;
      const std::optional<VariablePlace> bp = variable_place(model, data, i, intercept_dim);
      const std::optional<VariablePlace> wp = variable_place(model, data, w_index, coefficient_dim);
      if (!bp || !wp || b.rank > 1 || w.rank > 2 || (b.rank == 0 && w.rank == 2) || bp->count == 0 || wp->count == 0)
        continue;
      const bool groups = b.rank == 1 && w.rank < 2;
      const int64_t K = groups ? 1 : bp->count, D = w.rank == 0 ? 1 : wp->dims[0];
      if ((w.rank == 2 ? wp->dims[1] : 1) != K) continue;
      // A companion: x read with an earlier product's W in other sums, centred with that product's x.
      auto first = std::find_if(blocks.begin(), blocks.end(), [&](const CentringBlock& c) {
        return c.intercept_name == b.name && c.coefficient_name == w.name;
      });
      if (first != blocks.end()) {
        if (model.abi_version >= 16 && !first->group_means() && first->columns == D) first->companions.push_back(x);
        else refused.push_back(b.name);
        continue;
      }
      CentringBlock block{x, {}, b.name, w.name, Eigen::Index(bp->offset), Eigen::Index(wp->offset),
                          Eigen::Index(D), Eigen::Index(K), {}, {}, 1, {}, false};
      block.groups = groups ? Eigen::Index(bp->count) : 1;
      if (model.abi_version >= 15 && b.centring_group && *b.centring_group && coefficient_group == FVI_GROUP_LOCAL) {
        // Each group at its own mean of a vector x: one column, and a slope per group or one. (A
        // global W's product beside them shifts every group by the pooled xbar W, as without.)
        if (!groups || (w.rank == 1 && wp->count != bp->count)) continue;
        block.group_data = b.centring_group;
        block.slope_per_group = w.rank == 1;
        block.columns = 1;
      }
      blocks.push_back(std::move(block));
    }
  blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                              [&](const CentringBlock& c) {
                                return std::find(refused.begin(), refused.end(), c.intercept_name) != refused.end();
                              }),
               blocks.end());
  return blocks;
}

}  // namespace

std::vector<CentringBlock> centring_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index global_dim) {
  return marked_blocks(model, data, FVI_GROUP_GLOBAL, global_dim, FVI_GROUP_GLOBAL, global_dim);
}

std::vector<CentringBlock> local_centring_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index global_dim,
                                                 Eigen::Index local_dim, const std::vector<CentringBlock>& pooled) {
  std::vector<CentringBlock> blocks;
  for (CentringBlock& b : marked_blocks(model, data, FVI_GROUP_LOCAL, local_dim, FVI_GROUP_GLOBAL, global_dim))
    for (const CentringBlock& g : pooled)
      if (g.data == b.data && g.coefficient_name == b.coefficient_name && g.columns == b.columns &&
          g.means.size() == g.columns) {
        b.means = g.means;
        blocks.push_back(std::move(b));
        break;
      }
  return blocks;
}

namespace {

const fvi_tensor& centred_data(const CentringBlock& block, const fvi_data& data);

// The mean of x over each group's rows in `data` (G values; 0 for a group without rows).
Eigen::VectorXd means_by_group(const CentringBlock& block, const fvi_data& data) {
  int64_t rows = 0;
  column_sums(block, data, rows);  // checks x is there, one column
  const fvi_tensor& x = centred_data(block, data);
  const fvi_tensor* g = nullptr;
  for (int i = 0; i < data.count; ++i)
    if (std::strcmp(data.names[i], block.group_data.c_str()) == 0) g = &data.values[i];
  if (!g || g->rows * g->cols != rows)
    throw std::invalid_argument("centring: this party's data holds no '" + block.group_data + "' of " +
                                std::to_string(rows) + " groups, one for each row of '" + block.data + "'");
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(block.groups), counts = Eigen::VectorXd::Zero(block.groups);
  for (int64_t n = 0; n < rows; ++n) {
    const double c = g->data[n];
    if (!(c >= 1 && c <= double(block.groups) && c == std::floor(c)))
      throw std::invalid_argument("centring: '" + block.group_data + "[" + std::to_string(n + 1) + "]' is " +
                                  std::to_string(c) + ", not a group of '" + block.intercept_name + "' (1 to " +
                                  std::to_string(block.groups) + ")");
    sums[Eigen::Index(c) - 1] += x.data[n];
    counts[Eigen::Index(c) - 1] += 1;
  }
  for (Eigen::Index c = 0; c < block.groups; ++c) sums[c] = counts[c] > 0 ? sums[c] / counts[c] : 0.0;
  return sums;
}

// The locals a block's map reads as slopes: [first, first + count).
std::pair<Eigen::Index, Eigen::Index> slopes_of(const CentringBlock& b) {
  return {b.coefficient, b.group_means() ? (b.slope_per_group ? b.groups : 1) : b.columns};
}

}  // namespace

std::vector<CentringBlock> local_slope_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index local_dim) {
  std::vector<CentringBlock> blocks;
  for (CentringBlock& b : marked_blocks(model, data, FVI_GROUP_LOCAL, local_dim, FVI_GROUP_LOCAL, local_dim)) {
    if (b.group_means()) {
      if (!b.companions.empty()) continue;  // each group's mean is of one x's rows (the compiler's mark)
      b.means = means_by_group(b, data);
      blocks.push_back(std::move(b));
      continue;
    }
    // Otherwise the compiler marks a real a only (local_slope_centring_of): one class, one group.
    if (b.classes != 1 || b.groups != 1) continue;
    int64_t rows = 0;
    const Eigen::VectorXd sums = column_sums(b, data, rows);
    if (rows == 0) continue;  // no rows: nothing to centre at, the fit is as written
    b.means = sums / double(rows);
    blocks.push_back(std::move(b));
  }
  // No chains (the compiler refuses them): a block whose slope is another's intercept is dropped.
  std::vector<CentringBlock> kept;
  for (const CentringBlock& b : blocks) {
    bool chained = false;
    for (const CentringBlock& c : blocks) {
      const auto [b_first, b_count] = slopes_of(b);
      const auto [c_first, c_count] = slopes_of(c);
      const bool slope_is_intercept = c.intercept + c.groups > b_first && c.intercept < b_first + b_count;
      const bool intercept_is_slope = b.intercept + b.groups > c_first && b.intercept < c_first + c_count;
      chained = chained || slope_is_intercept || intercept_is_slope;
    }
    if (!chained) kept.push_back(b);
  }
  return kept;
}

std::vector<std::string> local_slope_sums(const fvi_model& model) {
  std::vector<std::string> sums;
  if (model.abi_version < 13) return sums;
  for (int i = 0; i < model.variable_count; ++i) {
    if (group_kind(model, model.variables[i].group) != FVI_GROUP_LOCAL) continue;
    // `a[g] + x * b[g]` where each group is centred at its own mean.
    const fvi_variable_info& a = model.variables[i];
    const std::string by =
        model.abi_version >= 15 && a.centring_group && *a.centring_group ? std::string("[") + a.centring_group + "]" : "";
    // Companions (one slope's x in different sums) as one product: `a + (x or v) * b`.
    std::vector<std::pair<std::string, int>> products;
    for (const auto& [x, w_index] : marked_products(model, i)) {
      if (!x || !*x || w_index < 0 || w_index >= model.variable_count ||
          group_kind(model, model.variables[w_index].group) != FVI_GROUP_LOCAL)
        continue;
      auto at = std::find_if(products.begin(), products.end(), [&](const auto& p) { return p.second == w_index; });
      if (at == products.end()) products.push_back({x, w_index});
      else at->first += std::string(" or ") + x;
    }
    std::string sum;
    for (const auto& [x, w_index] : products)
      sum += " + " + (x.find(' ') == std::string::npos ? x : "(" + x + ")") + " * " + model.variables[w_index].name +
             (model.variables[w_index].rank == 1 ? by : "");
    if (!sum.empty())
      sums.push_back(a.name + by + sum + (by.empty() ? " at the silo's own column means" : " at each group's own mean"));
  }
  return sums;
}

std::vector<const CentringBlock*> one_block_per_data(const std::vector<CentringBlock>& blocks) {
  std::vector<const CentringBlock*> first;
  for (const CentringBlock& b : blocks) {
    bool seen = false;
    for (const CentringBlock* f : first) seen = seen || f->data == b.data;
    if (!seen) first.push_back(&b);
  }
  return first;
}

void set_data_means(std::vector<CentringBlock>& blocks, const std::string& x, const Eigen::VectorXd& means) {
  for (CentringBlock& b : blocks)
    if (b.data == x) b.means = means;
}

void set_data_scales(std::vector<CentringBlock>& blocks, const std::string& x, const Eigen::VectorXd& scales) {
  for (CentringBlock& b : blocks)
    if (b.data == x) b.scales = scales;
}

namespace {

// The part `name` of a block in `data`, checked to have the block's D columns.
const fvi_tensor& data_part(const CentringBlock& block, const std::string& name, const fvi_data& data) {
  for (int i = 0; i < data.count; ++i) {
    if (std::strcmp(data.names[i], name.c_str()) != 0) continue;
    const fvi_tensor& x = data.values[i];
    if (x.cols != block.columns || x.rows < 0)
      throw std::invalid_argument("centring: '" + name + "' has " + std::to_string(x.cols) +
                                  " columns; its coefficient has " + std::to_string(block.columns) + " rows");
    return x;
  }
  throw std::invalid_argument("centring: this party's data holds no '" + name + "'");
}

// x in `data` (a block of one x: means_by_group reads its rows).
const fvi_tensor& centred_data(const CentringBlock& block, const fvi_data& data) {
  return data_part(block, block.data, data);
}

}  // namespace

std::vector<std::string> CentringBlock::parts() const {
  std::vector<std::string> all{data};
  all.insert(all.end(), companions.begin(), companions.end());
  return all;
}

bool CentringBlock::centres(const std::string& name) const {
  return name == data || std::find(companions.begin(), companions.end(), name) != companions.end();
}

std::string CentringBlock::data_text(const char* conjunction) const {
  const std::vector<std::string> all = parts();
  std::string text;
  for (size_t i = 0; i < all.size(); ++i) text += (i == 0 ? "" : i + 1 == all.size() ? conjunction : ", ") + all[i];
  return text;
}

Eigen::VectorXd column_sums(const CentringBlock& block, const fvi_data& data, int64_t& rows) {
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(block.columns);
  rows = 0;
  for (const std::string& name : block.parts()) {
    const fvi_tensor& x = data_part(block, name, data);
    rows += x.rows;
    sums += Eigen::Map<const Eigen::MatrixXd>(x.data, x.rows, x.cols).colwise().sum().transpose();
  }
  return sums;
}

void centre_columns(const CentringBlock& block, double* values, int64_t rows) {
  Eigen::Map<Eigen::MatrixXd> m(values, rows, block.columns);
  m.rowwise() -= block.means.transpose();
}

Eigen::VectorXd column_sums_of_squares(const CentringBlock& block, const fvi_data& data) {
  Eigen::VectorXd squares = Eigen::VectorXd::Zero(block.columns);
  for (const std::string& name : block.parts()) {
    const fvi_tensor& x = data_part(block, name, data);
    squares += Eigen::Map<const Eigen::MatrixXd>(x.data, x.rows, x.cols).colwise().squaredNorm().transpose();
  }
  return squares;
}

Eigen::VectorXd pooled_scales(const Eigen::VectorXd& sums_of_squares, double rows) {
  Eigen::VectorXd s = Eigen::VectorXd::Ones(sums_of_squares.size());
  if (!(rows > 0)) return s;
  for (Eigen::Index j = 0; j < s.size(); ++j) {
    const double sd = std::sqrt(sums_of_squares[j] / rows);
    if (std::isfinite(sd) && sd > 1) s[j] = sd;
  }
  return s;
}

namespace {

// f(index of W_jk among the globals, s_j) for every coefficient of a block with scales, once:
// a group intercept and its location share x and W (two blocks, one W).
template <typename F>
void each_scaled_coefficient(const std::vector<CentringBlock>& blocks, F f) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const CentringBlock& c = blocks[i];
    if (c.scales.size() != c.columns) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = blocks[j].coefficient == c.coefficient && blocks[j].scales.size() > 0;
    if (seen) continue;
    for (Eigen::Index k = 0; k < c.classes; ++k)
      for (Eigen::Index j = 0; j < c.columns; ++j) f(c.coefficient + k * c.columns + j, c.scales[j]);
  }
}

}  // namespace

void to_step_coordinates(const std::vector<CentringBlock>& blocks, Eigen::VectorXd& params, Eigen::VectorXd& gradient,
                         Eigen::VectorXd& limit) {
  each_scaled_coefficient(blocks, [&](Eigen::Index i, double s) {
    params[i] *= s;
    gradient[i] /= s;  // d/d(s W) = (d/dW) / s
    if (limit.size() > 0) limit[i] *= s;
  });
}

void from_step_coordinates(const std::vector<CentringBlock>& blocks, Eigen::VectorXd& params) {
  each_scaled_coefficient(blocks, [&](Eigen::Index i, double s) { params[i] /= s; });
}

void set_starting_sds(const std::vector<CentringBlock>& blocks, double init_sd, Eigen::Ref<Eigen::VectorXd> log_sd) {
  each_scaled_coefficient(blocks, [&](Eigen::Index i, double s) { log_sd[i] = std::log(init_sd / s); });
}

namespace {

// b -= sign * xbar W for every column of z.
void shift_intercepts(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> z, double sign) {
  for (const CentringBlock& c : blocks) {
    if (c.group_means()) {
      if (c.means.size() != c.groups) continue;
      for (Eigen::Index g = 0; g < c.groups; ++g) z.row(c.intercept + g) -= (sign * c.means[g]) * z.row(c.slope_at(g));
      continue;
    }
    if (c.means.size() != c.columns) continue;
    for (Eigen::Index k = 0; k < c.classes; ++k) {
      const Eigen::RowVectorXd shift = sign * (c.means.transpose() * z.middleRows(c.coefficient + k * c.columns, c.columns));
      for (Eigen::Index g = 0; g < c.groups; ++g) z.row(c.intercept_at(k, g)) -= shift;
    }
  }
}

}  // namespace

void to_written(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> z) { shift_intercepts(blocks, z, 1); }
void to_fit(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> z) { shift_intercepts(blocks, z, -1); }

void pull_back(const std::vector<CentringBlock>& blocks, Eigen::Ref<Eigen::MatrixXd> gradient) {
  for (const CentringBlock& c : blocks) {
    if (c.group_means()) {
      // a = a_c - xbar_g b_g: d/db_g (fit) = d/db_g - xbar_g d/da_g.
      if (c.means.size() != c.groups) continue;
      for (Eigen::Index g = 0; g < c.groups; ++g) gradient.row(c.slope_at(g)) -= c.means[g] * gradient.row(c.intercept + g);
      continue;
    }
    if (c.means.size() != c.columns) continue;
    for (Eigen::Index k = 0; k < c.classes; ++k)
      gradient.middleRows(c.coefficient + k * c.columns, c.columns) -=
          c.means * gradient.middleRows(c.intercept_at(k, 0), c.groups).colwise().sum();
  }
}

Eigen::VectorXd written_sd(const std::vector<CentringBlock>& blocks, const StructuredGlobalGaussian<double>& q) {
  if (q.correlated()) {
    // Sigma = K K^T with K = D_G L_G; the written globals' covariance is (T K)(T K)^T.
    Eigen::MatrixXd k = q.sd().asDiagonal() * q.unit_lower();
    to_written(blocks, k);
    return k.rowwise().norm();
  }
  // Mean-field: var b = var b_c + sum_d xbar_d^2 var W_dk (b_c and W independent under q).
  Eigen::VectorXd var = q.sd().cwiseAbs2();
  const Eigen::VectorXd fit_var = var;
  for (const CentringBlock& c : blocks) {
    if (c.means.size() != c.columns) continue;
    for (Eigen::Index k = 0; k < c.classes; ++k)
      var.segment(c.intercept_at(k, 0), c.groups).array() +=
          c.means.cwiseAbs2().dot(fit_var.segment(c.coefficient + k * c.columns, c.columns));
  }
  return var.cwiseSqrt();
}

void locals_to_written(const std::vector<CentringBlock>& blocks, const Eigen::MatrixXd& z_global,
                       Eigen::Ref<Eigen::MatrixXd> z_local) {
  if (blocks.empty() || z_local.cols() == 0) return;
  if (z_global.cols() == 0 || z_local.cols() % z_global.cols() != 0)
    throw std::invalid_argument("locals_to_written: " + std::to_string(z_local.cols()) + " local draws for " +
                                std::to_string(z_global.cols()) + " global draws");
  const Eigen::Index K = z_local.cols() / z_global.cols();
  for (const CentringBlock& c : blocks)
    for (Eigen::Index k = 0; k < c.classes; ++k) {
      // a_k = a_c,k - xbar W_k at each global draw, repeated for its K local draws.
      const Eigen::RowVectorXd shift = c.means.transpose() * z_global.middleRows(c.coefficient + k * c.columns, c.columns);
      for (Eigen::Index g = 0; g < c.groups; ++g)
        for (Eigen::Index s = 0; s < z_local.cols(); ++s) z_local(c.intercept_at(k, g), s) -= shift[s / K];
    }
}

Eigen::MatrixXd written_local_coupling(const std::vector<CentringBlock>& blocks, const Eigen::MatrixXd& coupling,
                                       Eigen::Index local_dim, Eigen::Index global_dim) {
  Eigen::MatrixXd t = coupling.size() > 0 ? coupling : Eigen::MatrixXd::Zero(local_dim, global_dim);
  for (const CentringBlock& c : blocks)
    for (Eigen::Index k = 0; k < c.classes; ++k)
      for (Eigen::Index g = 0; g < c.groups; ++g)
        t.row(c.intercept_at(k, g)).segment(c.coefficient + k * c.columns, c.columns) -= c.means.transpose();
  return t;
}

}  // namespace fvi::engine
