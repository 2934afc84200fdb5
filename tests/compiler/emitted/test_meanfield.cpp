// The generated kernels' mean-field entry points (forward_meanfield / backward_meanfield, with
// local reparameterisation), their float32 instances, and minibatches, through the C ABI:
//   - the locally reparameterised pre-activation x * w has the Gaussian it should (mean, variance,
//     and rows independent given q), within Monte Carlo error;
//   - the mean-field gradient estimates the gradient of the expected log likelihood, computed
//     independently by quadrature, within Monte Carlo error;
//   - backward_meanfield is the gradient of forward_meanfield (fixed noise key) by finite
//     differences, for every factor of every acceptance model;
//   - float32 kernels agree with double within float rounding;
//   - a minibatch's rows and gradients are the rows and partial sums of the full evaluation.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <type_traits>

#include "generated_models.h"
#include "support/gradient_check.h"
#include "support/quadrature.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace meanfield_test {

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using fvic::ir::RealTensor;

fvi_tensor view(RealTensor& t) { return fvi_tensor{t.m.data(), t.rows, t.cols, t.draws}; }

RealTensor copy(const fvi_tensor& t) {
  RealTensor out(t.rows, t.cols, t.draws);
  out.m = Eigen::Map<const MatrixXd>(t.data, t.rows, t.cols * t.draws);
  return out;
}

// One party's data as the ABI wants it (names and views into owned copies).
struct Data {
  explicit Data(const std::map<std::string, RealTensor>& values) {
    for (const auto& [name, value] : values) names.push_back(name), copies.push_back(value);
    for (size_t i = 0; i < names.size(); ++i) pointers.push_back(names[i].c_str()), views.push_back(view(copies[i]));
    data = fvi_data{static_cast<int>(names.size()), pointers.data(), views.data()};
  }
  std::vector<std::string> names;
  std::vector<RealTensor> copies;
  std::vector<const char*> pointers;
  std::vector<fvi_tensor> views;
  fvi_data data{};
};

// q (means, sds, their gradients) as the mean-field calls take it, in double or float.
template <class Scalar>
using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
template <class Scalar>
using Tensor = std::conditional_t<std::is_same_v<Scalar, float>, fvi_tensor_f32, fvi_tensor>;
template <class Scalar>
Tensor<Scalar> view_of(Matrix<Scalar>& x) {
  return Tensor<Scalar>{x.data(), x.rows(), 1, x.cols()};
}

// A bound factor with owned state.
struct Bound {
  Bound(const fvi_model* model, int factor, const fvi_data& data, bool float32 = false) : m(model) {
    fvi_error error{};
    state = float32 ? m->create_float32(factor, &data, &error) : m->create(factor, &data, &error);
    INFO(error.message);
    REQUIRE(state != nullptr);
    info = &m->factors[factor];
  }
  ~Bound() { m->destroy(state); }
  Bound(const Bound&) = delete;
  Bound& operator=(const Bound&) = delete;

  RealTensor forward(std::vector<RealTensor>& inputs, int64_t begin = 0, int64_t count = -1) {
    std::vector<fvi_tensor> v;
    for (RealTensor& t : inputs) v.push_back(view(t));
    fvi_tensor out{};
    fvi_error error{};
    int status = m->forward(state, begin, count, v.data(), &out, &error);
    INFO(error.message);
    REQUIRE(status == 0);
    return copy(out);
  }
  // Gradients of sum(seed_k .* value_k) for the given seeds (NULL where absent).
  std::vector<RealTensor> backward(std::vector<RealTensor*> seeds, const std::vector<RealTensor>& like) {
    std::vector<fvi_tensor> sv(seeds.size());
    std::vector<const fvi_tensor*> sp(seeds.size(), nullptr);
    for (size_t k = 0; k < seeds.size(); ++k)
      if (seeds[k]) sv[k] = view(*seeds[k]), sp[k] = &sv[k];
    std::vector<RealTensor> grads;
    for (const RealTensor& t : like) grads.push_back(RealTensor::zeros_like(t));
    std::vector<fvi_tensor> gv;
    for (RealTensor& t : grads) gv.push_back(view(t));
    fvi_error error{};
    int status = m->backward(state, sp.data(), gv.data(), &error);
    INFO(error.message);
    REQUIRE(status == 0);
    return grads;
  }
  // forward_meanfield with q in double, forward_meanfield_f32 with q in float.
  template <class Scalar>
  RealTensor forward_meanfield(std::vector<Matrix<Scalar>>& means, std::vector<Matrix<Scalar>>& sds, int64_t draws,
                               uint64_t key, int64_t begin = 0, int64_t count = -1) {
    std::vector<Tensor<Scalar>> mv, sv;
    for (Matrix<Scalar>& x : means) mv.push_back(view_of(x));
    for (Matrix<Scalar>& x : sds) sv.push_back(x.size() ? view_of(x) : Tensor<Scalar>{nullptr, 0, 0, 0});
    fvi_tensor out{};
    fvi_error error{};
    int status = 0;
    if constexpr (std::is_same_v<Scalar, float>)
      status = m->forward_meanfield_f32(state, begin, count, mv.data(), sv.data(), draws, key, &out, &error);
    else
      status = m->forward_meanfield(state, begin, count, mv.data(), sv.data(), draws, key, &out, &error);
    INFO(error.message);
    REQUIRE(status == 0);
    return copy(out);
  }
  // backward_meanfield into double buffers, backward_meanfield_f32 into float ones.
  template <class Scalar>
  void backward_meanfield(std::vector<RealTensor*> seeds, std::vector<Matrix<Scalar>>& d_means,
                          std::vector<Matrix<Scalar>>& d_sds) {
    std::vector<fvi_tensor> sv(seeds.size());
    std::vector<const fvi_tensor*> sp(seeds.size(), nullptr);
    for (size_t k = 0; k < seeds.size(); ++k)
      if (seeds[k]) sv[k] = view(*seeds[k]), sp[k] = &sv[k];
    std::vector<Tensor<Scalar>> mv, dv;
    for (Matrix<Scalar>& x : d_means) mv.push_back(view_of(x));
    for (Matrix<Scalar>& x : d_sds) dv.push_back(x.size() ? view_of(x) : Tensor<Scalar>{nullptr, 0, 0, 0});
    fvi_error error{};
    int status = 0;
    if constexpr (std::is_same_v<Scalar, float>)
      status = m->backward_meanfield_f32(state, sp.data(), mv.data(), dv.data(), &error);
    else
      status = m->backward_meanfield(state, sp.data(), mv.data(), dv.data(), &error);
    INFO(error.message);
    REQUIRE(status == 0);
  }
  std::vector<RealTensor> arguments() {
    std::vector<fvi_tensor> values(info->seed_count);
    fvi_error error{};
    REQUIRE(m->arguments(state, values.data(), &error) == 0);
    std::vector<RealTensor> out;
    for (const fvi_tensor& t : values) out.push_back(copy(t));
    return out;
  }

  const fvi_model* m;
  const fvi_factor_info* info = nullptr;
  void* state = nullptr;
};

struct Generated {
  const char* name;
  const fvi_model* (*model)();
};

std::vector<Generated> generated() {
#define ENTRY(name) {#name, fvi_model_##name},
  return {FVI_MODELS(ENTRY)};
#undef ENTRY
}

int likelihood_of(const fvi_model* m) {
  for (int f = 0; f < m->factor_count; ++f)
    if (m->factors[f].kind == FVI_LIKELIHOOD) return f;
  return -1;
}

// robust_logreg (y ~ bernoulli_logit(x * w + b), w in R^D then b in the global group) on given data.
struct Logistic {
  Logistic(const MatrixXd& x_, const VectorXd& y_)
      : D(RealTensor::constant(double(x_.cols()))),
        N(RealTensor::constant(double(x_.rows()))),
        x(x_.rows(), x_.cols(), 1),
        y(y_.size(), 1, 1) {
    x.m = x_;
    y.m = y_;
    data = std::make_unique<Data>(std::map<std::string, RealTensor>{{"D", D}, {"N", N}, {"x", x}, {"y", y}});
  }
  RealTensor D, N, x, y;
  std::unique_ptr<Data> data;
};

// Runs `check` on every factor of every acceptance model, bound to random data (unit/test_models.h)
// with random inputs of `draws` draws; `rng` continues from the data's generator seed.
using FactorCheck = std::function<void(const fvi_model*, int, Data&, fvic::ir::Bindings&, std::mt19937&)>;
void for_each_factor(unsigned seed, long long draws, const FactorCheck& check) {
  for (const Generated& g : generated()) {
    INFO("model " << g.name);
    fvic::test::ModelCase c(g.name, seed, draws);
    std::mt19937 rng(seed);
    Data data(c.bindings.data);
    const fvi_model* m = g.model();
    for (int fi = 0; fi < m->factor_count; ++fi) {
      INFO("factor " << m->factors[fi].name);
      check(m, fi, data, c.bindings, rng);
    }
  }
}

}  // namespace

TEST_CASE("local reparameterisation samples x * w from its Gaussian, rows independent given q",
          "[emitted][meanfield]") {
  // eta = x * w + b with w ~ N(mu, diag(sd^2)) and b held at its mean (sd 0): eta_n ~ N(x_n mu +
  // mu_b, sum_j x_nj^2 sd_j^2). With ordinary reparameterisation rows would share w and
  // cov(eta_1, eta_2) = sum_j x_1j x_2j sd_j^2; locally reparameterised they are independent.
  const int N = 2, D = 3;
  const int64_t S = 40000;
  MatrixXd x(N, D);
  x << 1.0, -2.0, 0.5, 1.5, -1.0, 2.0;  // sum_j x_1j x_2j sd_j^2 > 0 below: a visible correlation
  VectorXd y(N);
  y << 1, 0;
  Logistic l(x, y);
  const fvi_model* m = fvi_model_robust_logreg();
  Bound f(m, likelihood_of(m), l.data->data);
  std::vector<MatrixXd> means{MatrixXd(D + 1, 1)}, sds{MatrixXd(D + 1, 1)};
  means[0] << 0.3, -0.2, 0.1, 0.7;
  sds[0] << 0.8, 0.5, 1.2, 0.0;
  f.forward_meanfield(means, sds, S, 12345);
  RealTensor eta = f.arguments().at(1);
  REQUIRE(eta.rows == N);
  REQUIRE(eta.draws == S);
  VectorXd mu = x * means[0].topRows(D) + VectorXd::Constant(N, means[0](D, 0));
  VectorXd var = x.array().square().matrix() * sds[0].topRows(D).array().square().matrix();
  MatrixXd e = eta.m;  // N x S
  for (int n = 0; n < N; ++n) {
    double mean = e.row(n).mean();
    double v = (e.row(n).array() - mean).square().sum() / double(S - 1);
    INFO("row " << n << ": mean " << mean << " vs " << mu[n] << ", variance " << v << " vs " << var[n]);
    // Standard errors of a Gaussian sample's mean and variance; 5 of them.
    CHECK(std::abs(mean - mu[n]) <= 5 * std::sqrt(var[n] / double(S)));
    CHECK(std::abs(v - var[n]) <= 5 * var[n] * std::sqrt(2.0 / double(S - 1)));
  }
  double c = ((e.row(0).array() - mu[0]) * (e.row(1).array() - mu[1])).mean();
  double shared = (x.row(0).array() * x.row(1).array() * sds[0].topRows(D).col(0).transpose().array().square()).sum();
  INFO("covariance of the rows " << c << "; with shared draws of w it would be " << shared);
  // Independent rows: the sample covariance has standard error sqrt(var_1 var_2 / S).
  CHECK(std::abs(c) <= 5 * std::sqrt(var[0] * var[1] / double(S)));
  REQUIRE(std::abs(shared) > 20 * std::sqrt(var[0] * var[1] / double(S)));  // the test can tell them apart

  // Another key gives other noise; the same key the same.
  RealTensor again = (f.forward_meanfield(means, sds, S, 12345), f.arguments().at(1));
  CHECK((again.m - eta.m).cwiseAbs().maxCoeff() == 0.0);
  RealTensor other = (f.forward_meanfield(means, sds, S, 777), f.arguments().at(1));
  CHECK((other.m - eta.m).cwiseAbs().maxCoeff() > 0.0);
}

TEST_CASE("the mean-field gradient estimates the expected log likelihood's gradient", "[emitted][meanfield]") {
  // E_q sum_n log p(y_n | eta_n), eta_n = x_n w + b, q = N(mu, diag(sd^2)) over (w, b):
  // eta_n ~ N(m_n, v_n), m_n = x_n mu_w + mu_b, v_n = sum_j x_nj^2 sd_j^2 + sd_b^2. With
  // f_n(eta) = y_n eta - log(1 + e^eta): d/dm_n E f_n = E f_n', d/dv_n E f_n = E f_n'' / 2, computed
  // by quadrature (independent of the kernels) and chained to mu and sd by hand.
  const int N = 6, D = 2;
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  MatrixXd x(N, D);
  for (int i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  VectorXd y(N);
  for (int n = 0; n < N; ++n) y[n] = n % 2;
  Logistic l(x, y);
  VectorXd mu(D + 1), sd(D + 1);
  mu << 0.4, -0.6, 0.2;
  sd << 0.7, 0.3, 0.5;

  VectorXd exact_dmu = VectorXd::Zero(D + 1), exact_dsd = VectorXd::Zero(D + 1);
  for (int n = 0; n < N; ++n) {
    double m = x.row(n).dot(mu.head(D)) + mu[D];
    double v = x.row(n).array().square().matrix().dot(sd.head(D).array().square().matrix()) + sd[D] * sd[D];
    double s = std::sqrt(v);
    auto expect = [&](const std::function<double(double)>& g) {
      auto integrand = [&](double e) {
        return g(e) * std::exp(-0.5 * std::pow((e - m) / s, 2)) / (s * std::sqrt(2 * M_PI));
      };
      return fvi::test::integrate_real_line(integrand, m, s).value;
    };
    double d1 = expect([&](double e) { return y[n] - 1 / (1 + std::exp(-e)); });
    double d2 = expect([&](double e) {
      double p = 1 / (1 + std::exp(-e));
      return -p * (1 - p);
    });
    for (int j = 0; j < D; ++j) {
      exact_dmu[j] += d1 * x(n, j);
      exact_dsd[j] += 0.5 * d2 * 2 * x(n, j) * x(n, j) * sd[j];
    }
    exact_dmu[D] += d1;
    exact_dsd[D] += 0.5 * d2 * 2 * sd[D];
  }

  // Batches of S draws, each with its own key: the batch means' spread gives the Monte Carlo error.
  const fvi_model* m = fvi_model_robust_logreg();
  Bound f(m, likelihood_of(m), l.data->data);
  const int batches = 40;
  const int64_t S = 2000;
  MatrixXd est(2 * (D + 1), batches);
  for (int b = 0; b < batches; ++b) {
    std::vector<MatrixXd> means{mu}, sds{sd};
    RealTensor out = f.forward_meanfield(means, sds, S, 1000 + b);
    RealTensor seed = RealTensor::zeros_like(out);
    seed.m.setConstant(1.0 / double(S));  // the mean over draws of sum_n log p
    std::vector<MatrixXd> dm{MatrixXd::Zero(D + 1, 1)}, ds{MatrixXd::Zero(D + 1, 1)};
    f.backward_meanfield({&seed, nullptr}, dm, ds);
    est.col(b) << dm[0].col(0), ds[0].col(0);
  }
  VectorXd mean = est.rowwise().mean();
  VectorXd se = ((est.colwise() - mean).array().square().rowwise().sum() / (batches - 1) / batches).sqrt();
  VectorXd exact(2 * (D + 1));
  exact << exact_dmu, exact_dsd;
  for (int i = 0; i < exact.size(); ++i) {
    INFO("coordinate " << i << ": estimate " << mean[i] << " +- " << se[i] << ", exact " << exact[i]);
    CHECK(std::abs(mean[i] - exact[i]) <= 5 * se[i] + 1e-9 * std::abs(exact[i]));
  }
}

TEST_CASE("backward_meanfield is the gradient of forward_meanfield, every factor of every model",
          "[emitted][meanfield]") {
  for_each_factor(3, 2, [](const fvi_model* m, int fi, Data& data, fvic::ir::Bindings& b, std::mt19937& rng) {
    const fvi_factor_info& info = m->factors[fi];
    std::normal_distribution<double> normal;
    Bound f(m, fi, data.data);
    const int64_t S = 3;
    std::vector<MatrixXd> means, sds;
    for (int k = 0; k < info.group_count; ++k) {
      const RealTensor& in = b.inputs.at(fvi_group_name(m->group_kinds[info.groups[k]]));
      means.push_back(0.5 * MatrixXd::Random(in.rows, 1));
      sds.push_back(m->group_varies[info.groups[k]]
                        ? MatrixXd((0.3 + 0.5 * MatrixXd::Random(in.rows, 1).array().abs()).matrix())
                        : MatrixXd());
    }
    RealTensor out = f.forward_meanfield(means, sds, S, 99);
    std::vector<RealTensor> args = info.kind == FVI_LIKELIHOOD ? f.arguments() : std::vector<RealTensor>{};
    std::vector<RealTensor> seeds{RealTensor::zeros_like(out)};
    for (int k = 1; k < info.seed_count; ++k) seeds.push_back(RealTensor::zeros_like(args.at(k)));
    for (RealTensor& s : seeds)
      for (Eigen::Index i = 0; i < s.m.size(); ++i) s.m.data()[i] = normal(rng);
    std::vector<RealTensor*> seed_ptrs;
    for (RealTensor& s : seeds) seed_ptrs.push_back(&s);
    std::vector<MatrixXd> dm, ds;
    for (int k = 0; k < info.group_count; ++k)
      dm.push_back(MatrixXd::Zero(means[k].rows(), 1)),
          ds.push_back(MatrixXd::Zero(sds[k].rows(), sds[k].size() ? 1 : 0));
    f.backward_meanfield(seed_ptrs, dm, ds);

    // The objective as a function of one group's means or sds, the noise fixed by the key.
    auto objective = [&](int group, bool sd_part, const VectorXd& value) {
      std::vector<MatrixXd> mv = means, sv = sds;
      (sd_part ? sv : mv)[group].col(0) = value;
      RealTensor o = f.forward_meanfield(mv, sv, S, 99);
      double total = (seeds[0].m.array() * o.m.array()).sum();
      if (info.kind == FVI_LIKELIHOOD) {
        std::vector<RealTensor> a = f.arguments();
        for (int k = 1; k < info.seed_count; ++k) {
          RealTensor& s = seeds[k];
          RealTensor& v = a.at(k);
          // A constant argument (1 x 1, one draw) broadcasts: its seed is summed.
          total += v.m.size() == s.m.size() ? (s.m.array() * v.m.array()).sum() : s.m.sum() * v.m(0, 0);
        }
      }
      return total;
    };
    for (int k = 0; k < info.group_count; ++k)
      for (bool sd_part : {false, true}) {
        if (sd_part && !sds[k].size()) continue;
        INFO("group " << fvi_group_name(m->group_kinds[info.groups[k]]) << (sd_part ? " sd" : " mean"));
        VectorXd x0 = (sd_part ? sds : means)[k].col(0);
        VectorXd analytic = (sd_part ? ds : dm)[k].col(0);
        fvi::test::GradientCheckOptions options;
        options.noise = 1e-13;  // sums over rows and draws of a few ulps each
        auto result = fvi::test::check_gradient([&](const VectorXd& v) { return objective(k, sd_part, v); }, x0,
                                                analytic, options);
        INFO(result.report());
        CHECK(result.ok());
      }
  });
}

TEST_CASE("float32 kernels agree with double within float rounding", "[emitted][float32]") {
  for_each_factor(8, 3, [](const fvi_model* m, int fi, Data& data, fvic::ir::Bindings& b, std::mt19937& rng) {
    const fvi_factor_info& info = m->factors[fi];
    std::normal_distribution<double> normal;
    Bound d(m, fi, data.data), s(m, fi, data.data, true);
    std::vector<RealTensor> inputs;
    for (int k = 0; k < info.group_count; ++k) {
      RealTensor in = b.inputs.at(fvi_group_name(m->group_kinds[info.groups[k]]));
      in.m = in.m.cast<float>().cast<double>();  // representable in float: only the arithmetic differs
      inputs.push_back(in);
    }
    RealTensor od = d.forward(inputs), os = s.forward(inputs);
    REQUIRE(od.m.rows() == os.m.rows());
    REQUIRE(od.m.cols() == os.m.cols());
    // Each value is a short chain of float operations on inputs of magnitude <= scale: its error
    // is a few float roundings of the largest magnitude involved.
    auto close = [](const RealTensor& a, const RealTensor& b, const std::string& what) {
      INFO(what);
      double scale = std::max(1.0, std::max(a.m.cwiseAbs().maxCoeff(), b.m.cwiseAbs().maxCoeff()));
      double err = (a.m - b.m).cwiseAbs().maxCoeff();
      INFO("max |float - double| " << err << " at scale " << scale);
      CHECK(err <= 64 * std::numeric_limits<float>::epsilon() * scale);
      CHECK(err > 0);  // the float path really computes in float
    };
    close(os, od, "forward");
    RealTensor seed = RealTensor::zeros_like(od);
    for (Eigen::Index i = 0; i < seed.m.size(); ++i) seed.m.data()[i] = double(float(normal(rng)));
    std::vector<RealTensor*> seeds(info.seed_count, nullptr);
    seeds[0] = &seed;
    auto gd = d.backward(seeds, inputs), gs = s.backward(seeds, inputs);
    for (size_t k = 0; k < gd.size(); ++k)
      close(gs[k], gd[k], std::string("gradient w.r.t. ") + fvi_group_name(m->group_kinds[info.groups[k]]));
  });
}

// The float entry points are the double ones with q and its gradient stored in float: given the
// same (float) means and sds, a state computes the same output whichever call it gets, and the
// float gradient is the double one rounded to float (exactly: each element is one value the
// kernel computed, converted once).
TEST_CASE("forward_meanfield_f32 and backward_meanfield_f32 are the double calls in float storage",
          "[emitted][meanfield][float32]") {
  for_each_factor(13, 2, [](const fvi_model* m, int fi, Data& data, fvic::ir::Bindings& b, std::mt19937& rng) {
    const fvi_factor_info& info = m->factors[fi];
    std::normal_distribution<double> normal;
    for (bool float32_state : {false, true}) {
      INFO((float32_state ? "create_float32" : "create") << " state");
      Bound f(m, fi, data.data, float32_state);
      const int64_t S = 3;
      std::vector<MatrixXd> means, sds;
      std::vector<Eigen::MatrixXf> means_f, sds_f;
      for (int k = 0; k < info.group_count; ++k) {
        const RealTensor& in = b.inputs.at(fvi_group_name(m->group_kinds[info.groups[k]]));
        means_f.push_back((0.5 * Eigen::MatrixXf::Random(in.rows, 1)).eval());
        sds_f.push_back(m->group_varies[info.groups[k]]
                            ? Eigen::MatrixXf((0.3f + 0.5f * Eigen::MatrixXf::Random(in.rows, 1).array().abs()).matrix())
                            : Eigen::MatrixXf());
        means.push_back(means_f.back().cast<double>());
        sds.push_back(sds_f.back().cast<double>());
      }
      const RealTensor out_d = f.forward_meanfield(means, sds, S, 41);
      std::vector<RealTensor> seeds{RealTensor::zeros_like(out_d)};
      if (info.kind == FVI_LIKELIHOOD)
        for (int k = 1; k < info.seed_count; ++k) seeds.push_back(RealTensor::zeros_like(f.arguments().at(k)));
      for (RealTensor& s : seeds)
        for (Eigen::Index i = 0; i < s.m.size(); ++i) s.m.data()[i] = normal(rng);
      std::vector<RealTensor*> seed_ptrs;
      for (RealTensor& s : seeds) seed_ptrs.push_back(&s);
      std::vector<MatrixXd> dm, ds;
      std::vector<Eigen::MatrixXf> dm_f, ds_f;
      for (int k = 0; k < info.group_count; ++k) {
        dm.push_back(MatrixXd::Constant(means[k].rows(), 1, 7.0));  // overwritten: not zero-filled first
        ds.push_back(MatrixXd::Constant(sds[k].rows(), sds[k].size() ? 1 : 0, 7.0));
        dm_f.push_back(Eigen::MatrixXf::Constant(means[k].rows(), 1, 7.0f));
        ds_f.push_back(Eigen::MatrixXf::Constant(sds[k].rows(), sds[k].size() ? 1 : 0, 7.0f));
      }
      f.backward_meanfield(seed_ptrs, dm, ds);

      const RealTensor out_f = f.forward_meanfield(means_f, sds_f, S, 41);
      REQUIRE(out_f.m.rows() == out_d.m.rows());
      REQUIRE(out_f.m.cols() == out_d.m.cols());
      CHECK(out_f.m == out_d.m);
      f.backward_meanfield(seed_ptrs, dm_f, ds_f);
      for (int k = 0; k < info.group_count; ++k) {
        INFO("group " << fvi_group_name(m->group_kinds[info.groups[k]]));
        CHECK(dm_f[k] == dm[k].cast<float>());
        CHECK(ds_f[k] == ds[k].cast<float>());
      }
      // Not vacuous: another noise key moves the output of a sampled factor.
      bool sampled = false;
      for (const Eigen::MatrixXf& s : sds_f) sampled = sampled || s.size() > 0;
      if (sampled && out_d.m.size() > 0) CHECK(f.forward_meanfield(means_f, sds_f, S, 42).m != out_d.m);
    }
  });
}

TEST_CASE("a minibatch's rows and gradients are the rows and partial sums of the full evaluation",
          "[emitted][minibatch]") {
  for_each_factor(21, 2, [](const fvi_model* m, int fi, Data& data, fvic::ir::Bindings& b, std::mt19937& rng) {
    const fvi_factor_info& info = m->factors[fi];
    std::normal_distribution<double> normal;
    if (info.kind == FVI_DENSITY || info.kind == FVI_ELEMENTS) return;  // no rows to batch
    Bound f(m, fi, data.data);
    std::vector<RealTensor> inputs;
    for (int k = 0; k < info.group_count; ++k) inputs.push_back(b.inputs.at(fvi_group_name(m->group_kinds[info.groups[k]])));
    RealTensor full = f.forward(inputs);
    const int64_t rows = full.rows;
    if (rows < 3) return;  // one value per draw (multinomial_logit): nothing to batch
    RealTensor seed = RealTensor::zeros_like(full);
    for (Eigen::Index i = 0; i < seed.m.size(); ++i) seed.m.data()[i] = normal(rng);
    const int64_t begin = 1, count = rows - 2;
    RealTensor masked = seed;  // the full seeds, zero outside the batch
    RealTensor batch_seed(count, 1, seed.draws);
    for (Eigen::Index s = 0; s < seed.draws; ++s) {
      batch_seed.m.col(s) = seed.m.col(s).segment(begin, count);
      masked.m.col(s).setZero();
      masked.m.col(s).segment(begin, count) = seed.m.col(s).segment(begin, count);
    }
    std::vector<RealTensor*> seeds(info.seed_count, nullptr);
    seeds[0] = &masked;
    std::vector<RealTensor> expected = f.backward(seeds, inputs);

    // A coupling likelihood reads z_sum, the summed contributions of the batch's rows.
    std::vector<RealTensor> batch_inputs = inputs;
    int z_sum = -1;
    for (int k = 0; k < info.group_count; ++k)
      if (m->group_kinds[info.groups[k]] == FVI_GROUP_Z_SUM) {
        z_sum = k;
        RealTensor z(count, 1, inputs[k].draws);
        z.m = inputs[k].m.middleRows(begin, count);
        batch_inputs[k] = z;
      }
    RealTensor part = f.forward(batch_inputs, begin, count);
    REQUIRE(part.rows == count);
    REQUIRE(part.draws == full.draws);
    for (Eigen::Index s = 0; s < full.draws; ++s)
      CHECK((part.m.col(s) - full.m.col(s).segment(begin, count)).cwiseAbs().maxCoeff() <=
            8 * std::numeric_limits<double>::epsilon() * std::max(1.0, full.m.cwiseAbs().maxCoeff()));
    seeds[0] = &batch_seed;
    std::vector<RealTensor> got = f.backward(seeds, batch_inputs);
    for (size_t k = 0; k < got.size(); ++k) {
      INFO("gradient w.r.t. " << fvi_group_name(m->group_kinds[info.groups[k]]));
      if (static_cast<int>(k) == z_sum) {  // the batch's rows of z_sum; the others get no gradient
        RealTensor rows(count, 1, expected[k].draws);
        rows.m = expected[k].m.middleRows(begin, count);
        CHECK(expected[k].m.topRows(begin).cwiseAbs().maxCoeff() == 0.0);
        expected[k] = rows;
      }
      double scale = std::max(1.0, expected[k].m.cwiseAbs().maxCoeff());
      CHECK((got[k].m - expected[k].m).cwiseAbs().maxCoeff() <= 64 * std::numeric_limits<double>::epsilon() * scale);
    }

    // The mean-field variant draws a row's noise from the row's index: a batch's rows equal the
    // full evaluation's rows under one key. (Not for z_sum, an input whose rows are the batch's:
    // its noise follows its own rows.)
    if (z_sum >= 0) return;
    std::vector<MatrixXd> means, sds;
    for (int k = 0; k < info.group_count; ++k) {
      const RealTensor& in = b.inputs.at(fvi_group_name(m->group_kinds[info.groups[k]]));
      means.push_back(MatrixXd::Random(in.rows, 1));
      sds.push_back(m->group_varies[info.groups[k]] ? MatrixXd(MatrixXd::Random(in.rows, 1).cwiseAbs()) : MatrixXd());
    }
    RealTensor mf_full = f.forward_meanfield(means, sds, 4, 5);
    RealTensor mf_part = f.forward_meanfield(means, sds, 4, 5, begin, count);
    REQUIRE(mf_part.rows == count);
    for (Eigen::Index s = 0; s < mf_full.draws; ++s)
      CHECK((mf_part.m.col(s) - mf_full.m.col(s).segment(begin, count)).cwiseAbs().maxCoeff() <=
            8 * std::numeric_limits<double>::epsilon() * std::max(1.0, mf_full.m.cwiseAbs().maxCoeff()));
  });
}

// Every node keeps its buffer across calls (fvi/kernel/fused.h, abi_support.h): a state that has
// seen other batch sizes, full-data calls and mean-field calls computes exactly what a fresh
// state computes.
TEST_CASE("buffers reused across calls of other batch sizes give a fresh state's results", "[emitted][minibatch]") {
  for_each_factor(23, 3, [](const fvi_model* m, int fi, Data& data, fvic::ir::Bindings& b, std::mt19937& rng) {
    const fvi_factor_info& info = m->factors[fi];
    std::vector<RealTensor> inputs;
    for (int k = 0; k < info.group_count; ++k) inputs.push_back(b.inputs.at(fvi_group_name(m->group_kinds[info.groups[k]])));
    for (int k = 0; k < info.group_count; ++k)
      if (m->group_kinds[info.groups[k]] == FVI_GROUP_Z_SUM) return;  // rows follow the caller's batch
    Bound reused(m, fi, data.data);
    const int64_t rows = reused.forward(inputs).rows;
    std::normal_distribution<double> normal;
    std::vector<MatrixXd> means, sds;
    for (int k = 0; k < info.group_count; ++k) {
      means.push_back(MatrixXd::Random(inputs[k].rows, 1));
      sds.push_back(m->group_varies[info.groups[k]] ? MatrixXd(MatrixXd::Random(inputs[k].rows, 1).cwiseAbs()) : MatrixXd());
    }
    // (begin, count): a batch, a smaller one, the full data, a larger batch.
    std::vector<std::pair<int64_t, int64_t>> calls{{0, -1}};
    if ((info.kind == FVI_LIKELIHOOD || info.kind == FVI_CONTRIBUTION) && rows >= 4) calls = {{1, rows - 2}, {0, 1}, {0, -1}, {0, rows - 1}};
    for (auto [begin, count] : calls) {
      INFO("rows " << begin << " + " << count);
      RealTensor out = reused.forward(inputs, begin, count);
      Bound fresh(m, fi, data.data);
      RealTensor expected = fresh.forward(inputs, begin, count);
      CHECK((out.m - expected.m).cwiseAbs().maxCoeff() == 0.0);
      RealTensor seed = RealTensor::zeros_like(out);
      for (Eigen::Index i = 0; i < seed.m.size(); ++i) seed.m.data()[i] = normal(rng);
      std::vector<RealTensor*> seeds(info.seed_count, nullptr);
      seeds[0] = &seed;
      std::vector<RealTensor> got = reused.backward(seeds, inputs), want = fresh.backward(seeds, inputs);
      for (size_t k = 0; k < got.size(); ++k) CHECK((got[k].m - want[k].m).cwiseAbs().maxCoeff() == 0.0);
      RealTensor mf = reused.forward_meanfield(means, sds, 3, 9, begin, count);
      RealTensor mf_expected = fresh.forward_meanfield(means, sds, 3, 9, begin, count);
      CHECK((mf.m - mf_expected.m).cwiseAbs().maxCoeff() == 0.0);
    }
  });
}

}  // namespace meanfield_test
