#include "fvi/program/output.h"

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fvi/engine/bound_factor.h"

namespace fvi::program {

int64_t VariableLayout::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double bound_value(const char* data_name, double literal, const fvi_data& data, const std::string& variable) {
  if (!data_name || !*data_name) return literal;
  for (int i = 0; i < data.count; ++i)
    if (std::string(data.names[i]) == data_name && data.values[i].rows * data.values[i].cols == 1)
      return data.values[i].data[0];
  throw std::runtime_error("the bound '" + std::string(data_name) + "' of " + variable +
                           " is not a scalar of the data; its posterior is reported unconstrained");
}


std::vector<std::string> element_names(const VariableLayout& v) {
  std::vector<std::string> names;
  if (v.dims.empty()) return {v.name};
  if (v.dims.size() == 1) {
    for (int64_t i = 0; i < v.dims[0]; ++i) names.push_back(v.name + "." + std::to_string(i + 1));
    return names;
  }
  for (int64_t j = 0; j < v.dims[1]; ++j)
    for (int64_t i = 0; i < v.dims[0]; ++i)
      names.push_back(v.name + "." + std::to_string(i + 1) + "." + std::to_string(j + 1));
  return names;
}

std::string coordinate_name(const std::vector<VariableLayout>& layout, int64_t i, bool sd) {
  for (const VariableLayout& v : layout) {
    // Elementwise transforms only: a structured type's unconstrained values are not its elements.
    const bool elementwise = v.transform == FVI_IDENTITY || v.transform == FVI_LOWER || v.transform == FVI_UPPER ||
                             v.transform == FVI_INTERVAL || v.transform == FVI_AFFINE;
    if (elementwise && i >= v.offset && i < v.offset + v.elements())
      return element_names(v)[size_t(i - v.offset)] + (sd ? "'s sd" : "'s mean");
  }
  return "";
}

std::vector<VariableLayout> variable_layout(const fvi_model& model, fvi_group group, const fvi_data& data) {
  std::vector<VariableLayout> out;
  for (int i = 0; i < model.variable_count; ++i) {
    const fvi_variable_info& info = model.variables[i];
    if (engine::group_kind(model, info.group) != group) continue;
    // A structured matrix's or an affine parameter's unconstrained values: its declared value is
    // written as a quantity.
    if (info.transform >= FVI_CHOLESKY_CORR && info.transform <= FVI_UNIT_VECTOR) continue;
    VariableLayout v;
    v.name = info.name;
    int64_t dims[8] = {0};
    fvi_error error{};
    if (model.variable_shape(i, &data, &v.offset, dims, &error) != 0)
      throw std::runtime_error("the shape of " + v.name + ": " + error.message);
    // Arrays of vectors and the like flatten to (first dim, rest) for naming; rank <= 2 is exact.
    for (int d = 0; d < info.rank && d < 8; ++d) v.dims.push_back(dims[d]);
    if (v.dims.size() > 2) {
      int64_t rest = 1;
      for (size_t d = 1; d < v.dims.size(); ++d) rest *= v.dims[d];
      v.dims = {v.dims[0], rest};
    }
    v.transform = info.transform;
    try {
      v.lower = bound_value(info.lower_data, info.lower, data, v.name);
      v.upper = bound_value(info.upper_data, info.upper, data, v.name);
    } catch (const std::runtime_error&) {
      v.transform = FVI_IDENTITY;
    }
    out.push_back(v);
  }
  return out;
}

Eigen::MatrixXd constrain(const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& u) {
  Eigen::MatrixXd x = u;
  for (const VariableLayout& v : layout) {
    auto block = x.middleRows(v.offset, v.elements());
    switch (v.transform) {
      case FVI_LOWER: block = (v.lower + block.array().exp()).matrix(); break;
      case FVI_UPPER: block = (v.upper - block.array().exp()).matrix(); break;
      case FVI_INTERVAL:
        block = (v.lower + (v.upper - v.lower) / (1 + (-block.array()).exp())).matrix();
        break;
      case FVI_ORDERED:
      case FVI_POSITIVE_ORDERED:  // each draw (column) a vector: running sums of its steps
        for (Eigen::Index s = 0; s < block.cols(); ++s) {
          double running = 0;
          for (Eigen::Index i = 0; i < block.rows(); ++i) {
            const double step = i == 0 && v.transform == FVI_ORDERED ? block(i, s) : std::exp(block(i, s));
            block(i, s) = running += step;
          }
        }
        break;
      case FVI_SOFTMAX_SIMPLEX: {
        // each draw (column) a vector, its softmax; array[M] simplex[K]: M x K column-major, each
        // row's softmax
        const Eigen::Index m = v.dims.size() == 2 ? v.dims[0] : 1, k = m > 0 ? block.rows() / m : 0;
        for (Eigen::Index s = 0; s < block.cols(); ++s) {
          Eigen::Map<Eigen::MatrixXd, 0, Eigen::OuterStride<>> rows(block.col(s).data(), m, k,
                                                                     Eigen::OuterStride<>(m));
          for (Eigen::Index i = 0; i < m; ++i) {
            const double top = rows.row(i).maxCoeff();
            rows.row(i) = (rows.row(i).array() - top).exp().matrix();
            rows.row(i) /= rows.row(i).sum();
          }
        }
        break;
      }
      default: break;
    }
  }
  return x;
}

void write_posterior_json(const std::string& path, const PosteriorSummary& summary,
                          const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& draws,
                          const Eigen::VectorXd& mean, const Eigen::VectorXd& sd) {
  nlohmann::ordered_json j;
  j["model"] = summary.model;
  j["method"] = summary.method;
  j["silos"] = summary.silos;
  j["rounds"] = summary.rounds;
  if (summary.iterations > 0) {
    j["iterations"] = summary.iterations;
    j["converged"] = summary.converged;
    j["criterion"] = {{"relative_objective_change", summary.relative_change},
                      {"drift_sd", summary.drift},
                      {"standard_error_sd", summary.precision}};
    if (summary.tol > 0) j["criterion"]["tol"] = summary.tol;
    if (summary.tol_param > 0) j["criterion"]["tol_param"] = summary.tol_param;
  }
  if (std::isfinite(summary.khat)) j["khat"] = summary.khat;
  if (!summary.khat_reading.empty()) j["khat_reading"] = summary.khat_reading;
  if (std::isfinite(summary.locals_khat)) {
    j["locals_khat"] = summary.locals_khat;
    j["locals_poor"] = summary.locals_poor;
  }
  if (summary.moments_corrected) j["moments_corrected"] = true;
  if (!summary.notes.empty()) {
    nlohmann::ordered_json notes = nlohmann::ordered_json::array();
    for (const auto& [level, text] : summary.notes) notes.push_back({{"level", level}, {"text", text}});
    j["notes"] = notes;
  }
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  const double n = double(draws.cols());
  for (const VariableLayout& v : layout) {
    nlohmann::ordered_json entry;
    entry["shape"] = v.dims;
    std::vector<double> means, sds;
    // Stored column-major; written row-major.
    const int64_t rows = v.dims.empty() ? 1 : v.dims[0];
    const int64_t cols = v.dims.size() > 1 ? v.dims[1] : 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t k = v.offset + c * rows + r;
        if (v.transform == FVI_IDENTITY && k < mean.size()) {  // a quantity's rows lie past q's
          means.push_back(mean[k]);
          sds.push_back(sd[k]);
        } else {
          const double m = draws.row(k).mean();
          means.push_back(m);
          sds.push_back(std::sqrt((draws.row(k).array() - m).square().sum() / std::max(1.0, n - 1)));
        }
      }
    entry["mean"] = means;
    entry["sd"] = sds;
    vars[v.name] = entry;
  }
  j["variables"] = vars;
  j["elbo"] = summary.elbo;
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << std::setw(2) << j << '\n';
}

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
  header_written_ = append && std::ifstream(path).peek() != std::ifstream::traits_type::eof();
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot write " + path);
}

void MetricsWriter::row(int round, double elbo, double seconds, long long sent, long long received,
                        const std::vector<std::pair<std::string, double>>& extra) {
  if (!header_written_) {
    out_ << "round,elbo,seconds,bytes_sent,bytes_received";
    for (const auto& [k, v] : extra) out_ << ',' << k;
    out_ << '\n';
    header_written_ = true;
  }
  out_ << round << ',' << std::setprecision(10) << elbo << ',' << seconds << ',' << sent << ',' << received;
  for (const auto& [k, v] : extra) out_ << ',' << v;
  out_ << '\n' << std::flush;
}

SiloMetricsWriter::SiloMetricsWriter(const std::string& path, bool append) {
  const bool has_header = append && std::ifstream(path).peek() != std::ifstream::traits_type::eof();
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot write " + path);
  if (!has_header) out_ << "round,silo,bytes_sent,bytes_received,missing_replies,refused_replies,objective_term\n";
}

void SiloMetricsWriter::rows(int round, const std::vector<SiloTraffic>& traffic, const std::vector<double>& terms) {
  for (size_t k = 0; k < traffic.size(); ++k) {
    const double term = k < terms.size() ? terms[k] : std::numeric_limits<double>::quiet_NaN();
    out_ << round << ',' << k + 1 << ',' << traffic[k].sent << ',' << traffic[k].received << ','
         << traffic[k].missing << ',' << traffic[k].refused << ',' << std::setprecision(10) << term << '\n';
  }
  out_ << std::flush;
}

void write_model_files(const std::string& dir, const char* source, const char* plan_json) {
  const auto write = [&](const char* name, const char* text) {
    if (!text) return;
    std::ofstream f(dir + "/" + name);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + dir + "/" + name);
  };
  write("model.fvi", source);
  write("plan.json", plan_json);
}

void clear_previous_results(const std::string& dir, bool silo_folders) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const auto clear = [&](const fs::path& d) {
    for (const char* name : {"posterior.json", "draws.csv"}) fs::remove(d / name, ignored);
  };
  clear(dir);
  if (!silo_folders) return;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ignored))
    if (e.is_directory(ignored) && e.path().filename().string().rfind("silo-", 0) == 0) clear(e.path());
}

std::string human_bytes(long long b) {
  char buf[32];
  if (b < 10 * 1024) std::snprintf(buf, sizeof buf, "%lld B", b);
  else if (b < 10 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f kB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MB", b / 1048576.0);
  return buf;
}

std::string missing_note(long count, const char* what) {
  return count ? " (" + std::to_string(count) + " " + what + " missing)" : "";
}

long output_draws(const engine::Settings& settings, Eigen::Index parameters) {
  if (settings.has("output_draws")) return settings.integer("output_draws", 1000);
  return std::max(10L, std::min(1000L, long(10000000 / std::max<Eigen::Index>(1, parameters))));
}

}  // namespace fvi::program
