#pragma once
// The model IR: the log joint as a set of factors, each a typed tensor SSA graph over batched
// values (runtime/include/fvi/kernel/tensor.h: every value is rows x cols, with 1 or S draws).
//
// A factor is what one party evaluates (DESIGN.md §3, §4):
//   density       a sum of log densities (priors, their log-Jacobians, `target +=`): (1 x 1, S)
//   likelihood    one likelihood statement, one log density per observation: (n x 1, S); its
//                 distribution's arguments are exposed too, so robust losses can replace the NLL
//   contribution  a silo_sum operand, computed by silo k of a vertical model: (n x 1, S)
//   elements      the prior of one unconstrained local vector, one log density per element
//                 (m x 1, S): what an importance-weighted bound over each element needs
// Each factor reads groups of unconstrained variables (`global`, `local`, `split`, `hyper`,
// `z_sum`, ...) and its party's data; the adjoint pass (transform/adjoint.h) appends the nodes
// that compute the gradient of the factor with respect to every group it reads.
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/sparse_gp.h"
#include "frontend/semantic.h"
#include "fvi/kernel/abi.h"
#include "fvi/kernel/bytecode.h"

namespace fvic::ir {

enum class Op {
  // leaves
  Input,  // a variable's slice of an input group (unconstrained): group, offset, rows x cols
  Data,   // a data variable: name (ints arrive as whole-number reals); `batched` if sliced by rows
  Index,  // an int data variable used as an index: name, `batched` as Data
  Const,  // a real constant: value
  Seed,   // the adjoint of an output, supplied by the caller of the backward pass
  Tangent,  // an Input's direction in a Jacobian-vector product (transform/tangent.h): the same
            // slice of the tangent bound for its group
  // leaves of a factor's mean-field variant (transform/local_reparam.h)
  Mean,   // a variable's slice of its group's variational mean: group, offset, rows x cols, 1 draw
  Sd,     // the same slice of the group's variational standard deviation
  Noise,  // standard normals, rows x cols with S draws, drawn by the kernel: stream k; args: the
          // value whose rows it matches (rows follow the minibatch if `batched`)
  // forward operations (fvi::kernel names)
  Unary,  // name: exp, log, tanh, relu, ...
  Neg, Add, Sub, Mul, Div, Pow,
  Compare,  // name: == != < <= > >= && ||; args: a, b; 1 or 0 elementwise, no adjoint (derivative 0)
  Select,   // args: cond, a, b: a where cond is not 0, else b, elementwise (`c ? a : b`, an `if`'s term)
  MatMul, Transpose, Reshape, Sum, RowsDotProduct, Broadcast, LogSoftmax, Softmax,
  Reduce,  // name: max, min or prod of all elements, one value per draw
  CumulativeSum,  // running sums of a vector (rows) or row_vector (columns)
  IndexRows, IndexCols,  // args: value, Index node (1-based)
  ConcatRows, ConcatCols,  // args: a, b: a above b (append_row), a left of b (append_col)
  Cholesky,          // args: a (n x n, symmetric positive definite): its lower Cholesky factor
  Inverse,           // args: a (n x n, not singular): its inverse
  SquaredDistances,  // args: x (data, n x d points): the n x n squared distances (gp_exp_quad_cov)
  DiagMatrix,        // args: v (n x 1): the n x n matrix with v on its diagonal
  Diagonal,          // args: a: its diagonal, min(rows, cols) x 1 (also DiagMatrix's adjoint)
  MatrixConstrain,   // name: structure ("cholesky_corr"); args: u: the declared matrix from its
                     // unconstrained values (fvi/kernel/ops_matrix_constrain.h)
  MatrixLogJacobian, // name; args: u: the transform's log-Jacobian, 1 x 1
  Conv2d,  // args: x (N x C*H*W images, one per row), w (C_out x C*k*k); ints {C, H, W, k, padding}:
           // N x C_out*H_out*W_out, stride 1 (fvi/kernel/ops_conv.h)
  Pool,    // name: max or avg; args: x, or for max (x, v): v where x is largest in each window (max
           // pooling's tangent); ints {C, H, W, k}: k x k windows at stride k
  Lpdf,                  // name: distribution; args: outcome, parameters...
  Rng,                   // name: distribution; args: parameters; one draw per element and draw (a
                         // quantity's `dist_rng`): stream k of the quantity's noise key
  Program,  // k: Module::programs[k], statements run one at a time (ir/statement_program.h); args:
            // its operands; the log density (1 x 1), or its outputs flattened into one column
  // adjoint operations
  UnaryDerivative,  // name; args: x, y
  SumTo,            // args: g, like: g summed to the shape and draws of `like`
  MatMulGradLeft, MatMulGradRight,  // args: (g, b, like_a), (a, g, like_b)
  ScatterRows, ScatterCols,         // args: g, Index node; rows/cols of the result
  LogSoftmaxGrad, SoftmaxGrad,      // args: y, g
  CumulativeSumGrad,                // args: g: running sums from the end
  LpdfVjp,                          // name, k; args: g, outcome, parameters...
  ConcatRowsPart, ConcatColsPart,   // k: the operand (0, 1); args: g, a: operand k's rows/cols of g
  CholeskyGrad,                     // args: l (the Cholesky node), g: the (symmetric) adjoint of a
  InverseGrad,                      // args: y (the Inverse node), g: a's adjoint, -y' g y'
  MatrixConstrainGrad,              // name; args: u, g: u's adjoint given the matrix's
  MatrixLogJacobianGrad,            // name; args: u, g (1 x 1): u's adjoint given the log-Jacobian's
  ProgramVjp,                       // k: the operand; args: g, the Program node: operand k's gradient
  Conv2dGradInput, Conv2dGradWeight,  // args (g, w, like_x), (x, g, like_w); ints as Conv2d's
  PoolGrad,                         // name; args: x, g; ints as Pool's
};
const char* op_name(Op op);

struct Node {
  // Every member has its default here, so `Node n{Op::Const}` names the operation alone.
  Op op;
  std::vector<int> args = {};
  std::string name = {};  // function, distribution or data variable
  fvi_group group = FVI_GROUP_GLOBAL;  // Input, Mean, Sd: the group it reads (the kernel ABI's enum)
  double value = 0;   // Const
  int k = 0;          // LpdfVjp: the operand
  std::vector<long long> ints = {};  // Index: constant 1-based indices (when it names no data); Noise:
                                // the data and parameter nodes of the product it samples
  SymSize offset = {};  // Input: where the slice starts in its group
  // Index: the 1-based range first..last, sizes known from the data (`x[2:K]`, `x[K - 1]`), when
  // neither `ints` nor a data variable gives the indices
  bool range = false;
  SymSize first = {}, last = {};
  SymSize rows = SymSize::constant(1);
  SymSize cols = SymSize::constant(1);
  bool varies = false;   // has S draws (else one)
  bool batched = false;  // Data/Index: rows follow the minibatch
  bool active = false;   // depends on an Input: has an adjoint
};

// Quantity: a transformed parameter or generated quantity, its value per draw (rows x cols, S):
// evaluated after the fit by its owner, never differentiated (Module::quantities).
enum class FactorKind { Density, Likelihood, Contribution, Elements, Quantity };
const char* factor_kind_name(FactorKind kind);

// A group of unconstrained variables a factor reads, laid out one after another.
struct Slot {
  std::string variable;
  SymSize offset;
  SymSize size;
  // A global whose only prior is `variable ~ normal(a, h)`, h a scalar `real<lower=0>`
  // hyperparameter: h's name (else ""). The engine measures the log-sds of this global's q from
  // log h, so that spreads the data barely inform move with their prior's scale in one step.
  std::string prior_scale = "";
  // fvi_variable_info.class_shift (analysis/class_shift.h): 1 a matrix's rows, 2 a vector's
  // elements, that the likelihood sees only up to a shift along a softmax's classes; else 0.
  int class_shift = 0;
  // fvi_variable_info.centring_data / centring_coefficient and centring_more (analysis/centring.h):
  // each silo data x and global W this intercept is added to as `x * W`, when it may be fitted at
  // the centred x, the first product first; {"silo_sum", ""} for a vertical model's intercept of
  // the silos' summed partial predictors; empty otherwise.
  std::vector<std::pair<std::string, std::string>> centring = {};
  // fvi_variable_info.centring_group: a silo's vector of groups' intercepts of their own slopes,
  // each group centred at its own mean (analysis/centring.h local_slope_centring_of): the silo int
  // array giving each row's group; "" otherwise.
  std::string centring_group = "";
};
struct Group {
  fvi_group kind = FVI_GROUP_GLOBAL;  // the kernel ABI's number for it; fvi_group_name(kind) for messages
  std::vector<Slot> slots;
  SymSize size = SymSize::constant(0);
  bool varies = true;  // sampled (S draws) or a point estimate (hyperparameters: 1)
};

struct Factor {
  std::string name;
  FactorKind kind = FactorKind::Density;
  TermOwner owner = TermOwner::Server;
  std::vector<Node> nodes;       // forward nodes, then (after the adjoint pass) backward nodes
  int forward_end = 0;           // nodes [0, forward_end) are the forward pass
  int output = -1;               // lp, per-observation log density, or contribution
  std::string distribution;      // likelihood: its distribution
  int outcome = -1;              // likelihood: the outcome node
  std::vector<int> arguments;    // likelihood: the distribution's argument nodes
  SymSize rows = SymSize::constant(1);  // per-observation outputs: the observation count
  std::vector<fvi_group> groups;        // groups read, in input order
  std::vector<std::string> data;        // data variables read
  // A likelihood that reads the local group only as `b[idx]`, b the group's one vector and idx
  // an int data array over its rows: idx's name (row n depends on element idx[n] alone); else "".
  std::string local_index;
  std::string variable;  // quantity: the declared name
  bool aggregate = false;  // quantity: each silo's part of a silo_sum, added up by the server
  // Filled by the adjoint pass.
  std::vector<int> seeds;                      // Seed nodes: output, then each argument
  std::map<int, int> input_adjoints;           // Input node -> its adjoint node
};

struct Module {
  std::string model;
  std::vector<Group> groups;
  std::vector<Factor> factors;
  // factors[i] evaluated from a mean-field Gaussian's means and sds rather than from draws
  // (forward_meanfield, docs/kernel-abi.md): the same inputs and outputs, with every eligible
  // product of data and a parameter locally reparameterised (transform/local_reparam.h).
  std::vector<Factor> meanfield;
  // One Quantity factor per declaration of `transformed parameters` and `generated quantities`,
  // in declaration order (its owner evaluates it on the posterior's draws).
  std::vector<Factor> quantities;
  // Transformed data built by statements: the program each party runs when its data is read
  // (fvi_data_party order; analysis/transformed_data.h), "" where it has none.
  std::array<std::string, 3> transformed_data{};
  // The statement programs Op::Program nodes run (ir/statement_program.h), by index, and the
  // block each was made from ("the model block (line 9)"), for `fvic plan`.
  std::vector<fvi::kernel::Program> programs;
  std::vector<std::string> program_origins;
  // The model block's terms run as statement programs (no factor of their own): the planner
  // must not give them to a method that needs their factors (PVI's clients).
  bool model_block_programs = false;
  // A sparse GP's likelihood (analysis/sparse_gp.h) is no factor: the runtime's fvi/gp computes
  // it from the names the kernel ABI's fvi_sparse_gp gives.
  std::optional<SparseGpModel> sparse_gp;

  const Group* group(fvi_group kind) const;
};

// A node the differentiation passes add to `f`: shaped like node `like`, with S draws if any
// operand has them.
Node derived_node(const Factor& f, Op op, std::vector<int> args, int like, const std::string& name = "", int k = 0);

// `fvic dump --ir`: every factor's nodes, one per line, stable for golden tests.
std::string dump(const Module& module);

}  // namespace fvic::ir
