#include "transform/tangent.h"

#include "builtins.h"

#include <stdexcept>

namespace fvic::transform {

using ir::Node;
using ir::Op;

namespace {

// Distributions whose kernel is not elementwise (fvi/kernel/distributions.h lpdf_vjp): the
// vector-Jacobian product of arguments that are rows of a matrix (one log density per row), or one
// value per outcome beside arguments shared by every outcome (the ordinal densities' eta and
// cutpoints).
bool row_density(const std::string& dist) {
  return dist == "categorical_logit" || dist == "multinomial_logit" || stdlib::ordinal_density(dist);
}
bool elementwise_density(const std::string& dist) {
  return !row_density(dist) && dist != "dirichlet" && dist != "multi_normal_cholesky" && dist != "lkj_corr_cholesky" &&
         dist != "lkj_corr" && dist != "wishart" && dist != "inv_wishart";
}

class Tangent {
 public:
  Tangent(const ir::Factor& f, fvi_group group) : f_(f), group_(group) {
    out_.name = f.name;
    out_.kind = f.kind;
    out_.owner = f.owner;
    out_.distribution = f.distribution;
    out_.rows = f.rows;
    out_.groups = f.groups;
    out_.data = f.data;
    out_.variable = f.variable;
    out_.nodes.assign(f.nodes.begin(), f.nodes.begin() + f.forward_end);
    tangent_.assign(size_t(f.forward_end), -1);
  }

  ir::Factor run() {
    for (int i = 0; i < f_.forward_end; ++i) tangent_[size_t(i)] = propagate(i);
    out_.output = f_.output < 0 ? -1 : of(f_.output);
    out_.outcome = f_.outcome;
    for (int a : f_.arguments) out_.arguments.push_back(of(a));
    out_.forward_end = int(out_.nodes.size());
    return std::move(out_);
  }

 private:
  const Node& at(int i) const { return out_.nodes[size_t(i)]; }
  int add(Node n) {
    out_.nodes.push_back(std::move(n));
    return int(out_.nodes.size()) - 1;
  }
  // A new node shaped like node `like`, varying if any operand does.
  int make(Op op, std::vector<int> args, int like, const std::string& name = "", int k = 0) {
    Node n = ir::derived_node(out_, op, std::move(args), like, name, k);
    n.active = true;
    return add(n);
  }
  // A 1 x 1 node (per draw).
  int scalar(Op op, std::vector<int> args) {
    Node n{op};
    n.args = std::move(args);
    for (int a : n.args) n.varies |= at(a).varies;
    n.active = true;
    return add(n);
  }
  int with_ints(int node, const std::vector<long long>& ints) {  // a geometry (Conv2d, Pool) for node
    out_.nodes[size_t(node)].ints = ints;
    return node;
  }
  int constant(double value) {
    Node c{Op::Const};
    c.value = value;
    return add(c);
  }
  // The tangent of forward node i shaped like i (a tangent of an operand broadcast by i is
  // spread to i's rows and columns), or a zero of i's shape where the group does not reach i.
  int of(int i) {
    const int t = tangent_[size_t(i)];
    if (t < 0) return make(Op::Mul, {constant(0), i}, i);
    return fit(t, i);
  }
  int fit(int t, int i) {
    if (at(t).rows.equals(at(i).rows) && at(t).cols.equals(at(i).cols)) return t;
    return make(Op::Broadcast, {t, i}, i);
  }
  int sum_of(int a, int b, int like) {  // a + b where either may be absent (-1)
    if (a < 0) return b < 0 ? -1 : fit(b, like);
    if (b < 0) return fit(a, like);
    return make(Op::Add, {a, b}, like);
  }
  [[noreturn]] void unsupported(const Node& n) const {
    throw std::invalid_argument("no Jacobian-vector product for " + std::string(ir::op_name(n.op)) +
                                (n.name.empty() ? "" : " (" + n.name + ")") + " in factor " + f_.name + " yet");
  }

  int propagate(int i) {
    const Node n = at(i);  // a copy: adding nodes may move the vector
    auto arg = [&](size_t k) { return n.args[k]; };
    auto t = [&](size_t k) { return tangent_[size_t(n.args[k])]; };
    bool any = false;
    for (int a : n.args) any |= tangent_[size_t(a)] >= 0;
    if (n.op == Op::Input) {
      if (n.group != group_) return -1;
      Node leaf = n;
      leaf.op = Op::Tangent;
      leaf.args.clear();
      return add(leaf);
    }
    if (!any) return -1;
    switch (n.op) {
      case Op::Unary: {
        const int x = n.name == "relu" ? i : arg(0);  // relu's derivative (x > 0) equals (y > 0)
        return make(Op::Mul, {t(0), make(Op::UnaryDerivative, {x, i}, arg(0), n.name)}, i);
      }
      case Op::Neg: return make(Op::Neg, {t(0)}, i);
      case Op::Add: return sum_of(t(0), t(1), i);
      case Op::Sub: return sum_of(t(0), t(1) < 0 ? -1 : make(Op::Neg, {t(1)}, arg(1)), i);
      case Op::Mul:
        return sum_of(t(0) < 0 ? -1 : make(Op::Mul, {t(0), arg(1)}, i), t(1) < 0 ? -1 : make(Op::Mul, {arg(0), t(1)}, i), i);
      case Op::Div:
        return sum_of(t(0) < 0 ? -1 : make(Op::Div, {t(0), arg(1)}, i),
                      t(1) < 0 ? -1 : make(Op::Neg, {make(Op::Mul, {t(1), make(Op::Div, {i, arg(1)}, i)}, i)}, i), i);
      case Op::Pow: {
        int da = -1, db = -1;
        if (t(0) >= 0) {
          const int b_minus_1 = make(Op::Sub, {arg(1), constant(1)}, arg(1));
          da = make(Op::Mul, {t(0), make(Op::Mul, {arg(1), make(Op::Pow, {arg(0), b_minus_1}, i)}, i)}, i);
        }
        if (t(1) >= 0) db = make(Op::Mul, {t(1), make(Op::Mul, {i, make(Op::Unary, {arg(0)}, arg(0), "log")}, i)}, i);
        return sum_of(da, db, i);
      }
      case Op::MatMul:
        return sum_of(t(0) < 0 ? -1 : make(Op::MatMul, {fit(t(0), arg(0)), arg(1)}, i),
                      t(1) < 0 ? -1 : make(Op::MatMul, {arg(0), fit(t(1), arg(1))}, i), i);
      case Op::RowsDotProduct:
        return sum_of(t(0) < 0 ? -1 : make(Op::RowsDotProduct, {fit(t(0), arg(0)), arg(1)}, i),
                      t(1) < 0 ? -1 : make(Op::RowsDotProduct, {arg(0), fit(t(1), arg(1))}, i), i);
      case Op::Conv2d:  // bilinear in the images and the weight, as a product
        return sum_of(t(0) < 0 ? -1 : with_ints(make(Op::Conv2d, {fit(t(0), arg(0)), arg(1)}, i), n.ints),
                      t(1) < 0 ? -1 : with_ints(make(Op::Conv2d, {arg(0), fit(t(1), arg(1))}, i), n.ints), i);
      case Op::Pool:  // avg is linear; max passes on the tangent where x is largest in each window
        if (n.name == "avg") return with_ints(make(Op::Pool, {fit(t(0), arg(0))}, i, "avg"), n.ints);
        return with_ints(make(Op::Pool, {arg(0), fit(t(0), arg(0))}, i, "max"), n.ints);
      case Op::Transpose:
      case Op::Sum:
      case Op::CumulativeSum:
      case Op::DiagMatrix:
      case Op::Diagonal:
        return make(n.op, {fit(t(0), arg(0))}, i);
      case Op::Reshape:
      case Op::Broadcast:
      case Op::IndexRows:
      case Op::IndexCols: {  // linear in the first operand; the others (shape, index) stay
        Node copy = n;
        copy.args[0] = fit(t(0), arg(0));
        copy.varies |= at(copy.args[0]).varies;
        copy.active = true;
        return add(copy);
      }
      case Op::ConcatRows:
      case Op::ConcatCols: return make(n.op, {of(arg(0)), of(arg(1))}, i);
      case Op::Select: {
        const int zero = constant(0);
        return make(Op::Select, {arg(0), t(1) < 0 ? zero : t(1), t(2) < 0 ? zero : t(2)}, i);
      }
      case Op::Reduce: {
        const int x = arg(0), tx = fit(t(0), x);
        if (n.name == "prod") return make(Op::Mul, {i, make(Op::Sum, {make(Op::Div, {tx, x}, x)}, i)}, i);
        // max, min: the tangent at the elements equal to the result, as the adjoint pass reads it.
        const int where = make(Op::Compare, {x, make(Op::Broadcast, {i, x}, x)}, x, "==");
        return make(Op::Sum, {make(Op::Mul, {tx, where}, x)}, i);
      }
      // softmax's Jacobian diag(y) - y y' is symmetric: its JVP is its VJP.
      case Op::Softmax: return make(Op::SoftmaxGrad, {i, fit(t(0), arg(0))}, i);
      case Op::LogSoftmax: {  // v - sum(softmax(x) .* v), per draw
        const int v = fit(t(0), arg(0));
        const int weighted = make(Op::Sum, {make(Op::Mul, {make(Op::Unary, {i}, i, "exp"), v}, i)}, i);
        return make(Op::Sub, {v, make(Op::Broadcast, {weighted, i}, i)}, i);
      }
      case Op::Inverse: {  // -Y dA Y
        const int y_da = make(Op::MatMul, {i, fit(t(0), arg(0))}, i);
        return make(Op::Neg, {make(Op::MatMul, {y_da, i}, i)}, i);
      }
      case Op::Lpdf: return lpdf(i, n);
      case Op::Compare: return -1;  // derivative 0
      default: unsupported(n);
    }
  }

  // sum_k d log p / d argument_k . tangent_k, from the kernels' vector-Jacobian products with a
  // seed of ones: elementwise for elementwise densities (argument k spread to the output's shape
  // first, so that its partials are not summed over the rows it is broadcast to), by rows for a
  // density of each row of a matrix, summed for a density of the whole value (1 x 1).
  int lpdf(int i, const Node& n) {
    const int ones = make(Op::Broadcast, {constant(1), i}, i);
    int total = -1;
    for (size_t k = 0; k < n.args.size(); ++k) {
      const int tk = tangent_[size_t(n.args[k])];
      if (tk < 0) continue;
      std::vector<int> args{ones};
      args.insert(args.end(), n.args.begin(), n.args.end());
      int term;
      // An argument with one draw (a hyperparameter) beside an output with S: the kernel would sum
      // its partials over the draws, so it is given S draws of itself first.
      const int per_draw = at(n.args[k]).varies == at(i).varies ? n.args[k] : with_draws(n.args[k], n);
      if (elementwise_density(n.name)) {
        args[k + 1] = fit(per_draw, i);
        term = make(Op::Mul, {make(Op::LpdfVjp, args, i, n.name, int(k)), fit(tk, i)}, i);
      } else {
        args[k + 1] = per_draw;
        const int partial = make(Op::LpdfVjp, args, n.args[k], n.name, int(k));
        const int tangent = fit(tk, n.args[k]);
        if (row_density(n.name) && at(i).cols.equals(SymSize::constant(1)) && at(n.args[k]).rows.equals(at(i).rows))
          term = make(Op::RowsDotProduct, {partial, tangent}, i);
        else if (at(i).rows.equals(SymSize::constant(1)) && at(i).cols.equals(SymSize::constant(1)))
          term = make(Op::Sum, {make(Op::Mul, {partial, tangent}, n.args[k])}, i);
        else
          unsupported(n);
      }
      total = sum_of(total, term, i);
    }
    return total;
  }

  // x + 0, the 0 with S draws: 0 times the sum of the factor's first sampled input (finite).
  int with_draws(int x, const Node& n) {
    if (varying_zero_ < 0) {
      for (int j = 0; j < f_.forward_end && varying_zero_ < 0; ++j)
        if (at(j).op == Op::Input && at(j).varies) varying_zero_ = scalar(Op::Mul, {constant(0), scalar(Op::Sum, {j})});
      if (varying_zero_ < 0) unsupported(n);
    }
    Node sum{Op::Add};
    sum.args = {x, varying_zero_};
    sum.rows = at(x).rows, sum.cols = at(x).cols, sum.varies = true, sum.active = true;
    return add(sum);
  }

  const ir::Factor& f_;
  fvi_group group_;
  int varying_zero_ = -1;
  ir::Factor out_;
  std::vector<int> tangent_;  // forward node -> its tangent node (-1: 0)
};

}  // namespace

ir::Factor make_tangent(const ir::Factor& factor, fvi_group group) { return Tangent(factor, group).run(); }

}  // namespace fvic::transform
