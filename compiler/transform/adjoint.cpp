#include "transform/adjoint.h"

namespace fvic::transform {

using ir::Node;
using ir::Op;

namespace {

class Adjoint {
 public:
  explicit Adjoint(ir::Factor& f) : f_(f), adj_(f.forward_end, -1) {}

  void run() {
    seed(f_.output, "output");
    for (size_t k = 0; k < f_.arguments.size(); ++k)
      seed(f_.arguments[k], "argument " + std::to_string(k + 1));
    for (int i = f_.forward_end - 1; i >= 0; --i) {
      if (adj_[i] < 0 || !f_.nodes[i].active) continue;
      propagate(i, adj_[i]);
    }
  }

 private:
  int add(Node n) {
    f_.nodes.push_back(std::move(n));
    return static_cast<int>(f_.nodes.size()) - 1;
  }

  const Node& at(int i) const { return f_.nodes[i]; }

  // A new node shaped like forward node `like`.
  int make(Op op, std::vector<int> args, int like, const std::string& name = "", int k = 0) {
    Node n = ir::derived_node(f_, op, std::move(args), like, name, k);
    if (op == Op::SumTo || op == Op::MatMulGradLeft || op == Op::MatMulGradRight || op == Op::ScatterRows ||
        op == Op::ScatterCols || op == Op::Conv2dGradInput || op == Op::Conv2dGradWeight || op == Op::PoolGrad)
      n.varies = at(like).varies;
    return add(n);
  }

  int with_ints(int node, const std::vector<long long>& ints) {  // a geometry (Conv2d, Pool) for node
    f_.nodes[size_t(node)].ints = ints;
    return node;
  }

  // Every likelihood argument gets a seed, active or not, so that seed k always belongs to
  // argument k (kernel ABI: seed_count = 1 + the distribution's arguments).
  void seed(int node, const std::string& what) {
    if (node < 0) return;
    Node s{Op::Seed};
    s.name = what;
    s.rows = at(node).rows;
    s.cols = at(node).cols;
    s.varies = at(node).varies;
    int id = add(s);
    f_.seeds.push_back(id);
    if (at(node).active) accumulate(node, id);
  }

  // Adds a contribution to node i's adjoint, summed down to i's shape and draws if broadcast.
  void accumulate(int i, int contribution) {
    if (!at(i).active) return;
    const Node &n = at(i), &c = at(contribution);
    if (!(n.rows.equals(c.rows) && n.cols.equals(c.cols) && n.varies == c.varies))
      contribution = make(Op::SumTo, {contribution, i}, i);
    adj_[i] = adj_[i] < 0 ? contribution : make(Op::Add, {adj_[i], contribution}, i);
  }

  void propagate(int i, int g) {
    Node n = at(i);  // a copy: adding nodes may move the vector
    auto arg = [&](size_t k) { return n.args[k]; };
    auto active = [&](size_t k) { return at(n.args[k]).active; };
    switch (n.op) {
      case Op::Input:
      case Op::Mean:
      case Op::Sd: f_.input_adjoints[i] = g; return;
      case Op::Unary: {
        // relu's derivative (x > 0) equals (y > 0): reading y lets the backward pass drop x (the
        // pre-activation, as large as the activation) once the forward pass is done.
        int x = n.name == "relu" ? i : arg(0);
        accumulate(arg(0), make(Op::Mul, {g, make(Op::UnaryDerivative, {x, i}, arg(0), n.name)}, i));
        return;
      }
      case Op::Neg: accumulate(arg(0), make(Op::Neg, {g}, i)); return;
      case Op::Add:
        accumulate(arg(0), g);
        accumulate(arg(1), g);
        return;
      case Op::Sub:
        accumulate(arg(0), g);
        if (active(1)) accumulate(arg(1), make(Op::Neg, {g}, i));
        return;
      case Op::Mul:
        if (active(0)) accumulate(arg(0), make(Op::Mul, {g, arg(1)}, i));
        if (active(1)) accumulate(arg(1), make(Op::Mul, {g, arg(0)}, i));
        return;
      case Op::Div:
        if (active(0)) accumulate(arg(0), make(Op::Div, {g, arg(1)}, i));
        if (active(1)) accumulate(arg(1), make(Op::Neg, {make(Op::Mul, {g, make(Op::Div, {i, arg(1)}, i)}, i)}, i));
        return;
      case Op::Pow: {
        if (active(0)) {
          Node one{Op::Const};
          one.value = 1;
          int b_minus_1 = make(Op::Sub, {arg(1), add(one)}, arg(1));
          int d = make(Op::Mul, {arg(1), make(Op::Pow, {arg(0), b_minus_1}, i)}, i);
          accumulate(arg(0), make(Op::Mul, {g, d}, i));
        }
        if (active(1)) {
          int log_a = make(Op::Unary, {arg(0)}, arg(0), "log");
          accumulate(arg(1), make(Op::Mul, {g, make(Op::Mul, {i, log_a}, i)}, i));
        }
        return;
      }
      case Op::MatMul:
        if (active(0)) accumulate(arg(0), make(Op::MatMulGradLeft, {g, arg(1), arg(0)}, arg(0)));
        if (active(1)) accumulate(arg(1), make(Op::MatMulGradRight, {arg(0), g, arg(1)}, arg(1)));
        return;
      case Op::Conv2d:  // a product of the images' patches and the weight: matmul's two adjoints
        if (active(0)) accumulate(arg(0), with_ints(make(Op::Conv2dGradInput, {g, arg(1), arg(0)}, arg(0)), n.ints));
        if (active(1)) accumulate(arg(1), with_ints(make(Op::Conv2dGradWeight, {arg(0), g, arg(1)}, arg(1)), n.ints));
        return;
      case Op::Pool: accumulate(arg(0), with_ints(make(Op::PoolGrad, {arg(0), g}, arg(0), n.name), n.ints)); return;
      case Op::Transpose: accumulate(arg(0), make(Op::Transpose, {g}, arg(0))); return;
      case Op::Reshape: accumulate(arg(0), make(Op::SumTo, {g, arg(0)}, arg(0))); return;
      case Op::Sum: accumulate(arg(0), make(Op::Broadcast, {g, arg(0)}, arg(0))); return;
      case Op::RowsDotProduct:
        if (active(0)) accumulate(arg(0), make(Op::Mul, {g, arg(1)}, arg(1)));
        if (active(1)) accumulate(arg(1), make(Op::Mul, {g, arg(0)}, arg(0)));
        return;
      case Op::Broadcast: accumulate(arg(0), g); return;
      case Op::Reduce: {
        // max, min: g at the elements equal to the result; prod: g times the product over each element.
        const int spread = make(Op::Broadcast, {g, arg(0)}, arg(0));
        if (n.name == "prod") {
          accumulate(arg(0), make(Op::Div, {make(Op::Mul, {spread, make(Op::Broadcast, {i, arg(0)}, arg(0))}, arg(0)), arg(0)}, arg(0)));
        } else {
          accumulate(arg(0), make(Op::Mul, {spread, make(Op::Compare, {arg(0), i}, arg(0), "==")}, arg(0)));
        }
        return;
      }
      case Op::Select: {
        // g reaches the operand chosen at each element; the condition has derivative 0.
        Node zero{Op::Const};
        const int z = add(zero);
        if (active(1)) accumulate(arg(1), make(Op::Select, {arg(0), g, z}, i));
        if (active(2)) accumulate(arg(2), make(Op::Select, {arg(0), z, g}, i));
        return;
      }
      case Op::LogSoftmax: accumulate(arg(0), make(Op::LogSoftmaxGrad, {i, g}, i)); return;
      case Op::Softmax: accumulate(arg(0), make(Op::SoftmaxGrad, {i, g}, i)); return;
      case Op::CumulativeSum: accumulate(arg(0), make(Op::CumulativeSumGrad, {g}, i)); return;
      case Op::IndexRows: accumulate(arg(0), make(Op::ScatterRows, {g, arg(1), arg(0)}, arg(0))); return;
      case Op::IndexCols: accumulate(arg(0), make(Op::ScatterCols, {g, arg(1), arg(0)}, arg(0))); return;
      case Op::ConcatRows:
      case Op::ConcatCols: {
        // Each operand's own rows (columns) of g; the first operand's size says where they part.
        const Op part = n.op == Op::ConcatRows ? Op::ConcatRowsPart : Op::ConcatColsPart;
        for (int k = 0; k < 2; ++k)
          if (active(size_t(k))) accumulate(arg(size_t(k)), make(part, {g, arg(0)}, arg(size_t(k)), "", k));
        return;
      }
      case Op::Cholesky: accumulate(arg(0), make(Op::CholeskyGrad, {i, g}, arg(0))); return;
      case Op::Inverse: accumulate(arg(0), make(Op::InverseGrad, {i, g}, arg(0))); return;
      case Op::MatrixConstrain:
        accumulate(arg(0), make(Op::MatrixConstrainGrad, {arg(0), g}, arg(0), n.name));
        return;
      case Op::MatrixLogJacobian:
        accumulate(arg(0), make(Op::MatrixLogJacobianGrad, {arg(0), g}, arg(0), n.name));
        return;
      case Op::Program:  // the machine differentiates its tape (fvi/kernel/machine.h)
        for (size_t k = 0; k < n.args.size(); ++k)
          if (active(k)) accumulate(arg(k), make(Op::ProgramVjp, {g, i}, arg(k), "", static_cast<int>(k)));
        return;
      case Op::DiagMatrix: accumulate(arg(0), make(Op::Diagonal, {g}, arg(0))); return;
      case Op::Diagonal: accumulate(arg(0), make(Op::DiagMatrix, {g}, arg(0))); return;
      case Op::Lpdf:
        for (size_t k = 0; k < n.args.size(); ++k) {
          if (!active(k)) continue;
          std::vector<int> args{g};
          args.insert(args.end(), n.args.begin(), n.args.end());
          accumulate(arg(k), make(Op::LpdfVjp, args, arg(k), n.name, static_cast<int>(k)));
        }
        return;
      default: return;  // leaves and adjoint-only operations have no adjoint of their own
    }
  }

  ir::Factor& f_;
  std::vector<int> adj_;
};

}  // namespace

void make_adjoint(ir::Factor& factor) { Adjoint(factor).run(); }

void make_adjoints(ir::Module& module) {
  for (ir::Factor& f : module.factors) make_adjoint(f);
  for (ir::Factor& f : module.meanfield) make_adjoint(f);
}

}  // namespace fvic::transform
