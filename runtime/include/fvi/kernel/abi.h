/* The kernel ABI (docs/kernel-abi.md): how the model-independent runtime engines call the
 * factors the compiler generated for one model. Plain C, so that a JIT backend can provide the
 * same table without a C++ compile. Every tensor is column-major rows x (cols * draws), draw s in
 * columns [s*cols, (s+1)*cols) — the layout of fvi/kernel/tensor.h. */
#ifndef FVI_KERNEL_ABI_H
#define FVI_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FVI_ABI_VERSION 16

typedef struct fvi_tensor {
  double* data;
  int64_t rows;
  int64_t cols;
  int64_t draws;
} fvi_tensor;

/* The same layout in float: a mean-field q's means, sds and their gradients as an engine keeps
 * them for precision = float32 (forward_meanfield_f32, backward_meanfield_f32). */
typedef struct fvi_tensor_f32 {
  float* data;
  int64_t rows;
  int64_t cols;
  int64_t draws;
} fvi_tensor_f32;

/* One party's data: every variable it holds, by name (ints as whole-number doubles). */
typedef struct fvi_data {
  int count;
  const char* const* names;
  const fvi_tensor* values;
} fvi_data;

/* A message for the caller when a call fails (returns nonzero / NULL). */
typedef struct fvi_error {
  char message[512];
} fvi_error;

/* The groups of unconstrained values a factor reads (docs/kernel-abi.md, "Groups"). Compiler and
 * runtime name a group by this number, never by a string; the values are part of the ABI. */
enum fvi_group {
  FVI_GROUP_GLOBAL = 0,       /* `global` parameters: the server's posterior, S draws */
  FVI_GROUP_LOCAL = 1,        /* `local` parameters: each silo its own, S draws */
  FVI_GROUP_SPLIT = 2,        /* `split` parameters: silo k its own block, S draws */
  FVI_GROUP_HYPER = 3,        /* global hyperparameters: one point estimate */
  FVI_GROUP_LOCAL_HYPER = 4,  /* a silo's hyperparameters */
  FVI_GROUP_SPLIT_HYPER = 5,  /* a vertical silo's hyperparameters */
  FVI_GROUP_Z_SUM = 6,        /* a vertical likelihood's silo_sum: the silos' summed contributions, one per row */
  FVI_GROUP_COUNT = 7
};

/* The group's name as the language and the outputs spell it ("global", "local_hyper", ...); "?"
 * for a number that names no group. */
static inline const char* fvi_group_name(int group) {
  switch (group) {
    case FVI_GROUP_GLOBAL: return "global";
    case FVI_GROUP_LOCAL: return "local";
    case FVI_GROUP_SPLIT: return "split";
    case FVI_GROUP_HYPER: return "hyper";
    case FVI_GROUP_LOCAL_HYPER: return "local_hyper";
    case FVI_GROUP_SPLIT_HYPER: return "split_hyper";
    case FVI_GROUP_Z_SUM: return "z_sum";
    default: return "?";
  }
}

/* density: 1 x 1 per draw; likelihood and contribution: one value per observation (n x 1);
 * elements: the prior of one unconstrained local vector, one log density per element (m x 1). */
enum fvi_factor_kind { FVI_DENSITY = 0, FVI_LIKELIHOOD = 1, FVI_CONTRIBUTION = 2, FVI_ELEMENTS = 3 };
enum fvi_owner { FVI_SERVER = 0, FVI_SILO = 1, FVI_SPLIT_SILO = 2, FVI_COUPLING = 3 };

typedef struct fvi_factor_info {
  const char* name;
  int kind;                  /* fvi_factor_kind */
  int owner;                 /* fvi_owner: which party evaluates it */
  const char* distribution;  /* likelihoods: the distribution; else "" */
  int group_count;           /* input groups read, in the order forward() takes them */
  const int* groups;         /* indices into fvi_model.group_kinds */
  int seed_count;            /* backward() seeds: the output, then each distribution argument */
  /* A silo likelihood that reads the local group only as b[idx] (b its only vector, idx an int
   * data array over the likelihood's rows): idx's name, so row n depends on local element
   * idx[n] (1-based) alone. "" otherwise. */
  const char* local_index;
} fvi_factor_info;

enum fvi_transform {
  FVI_IDENTITY = 0,
  FVI_LOWER = 1,
  FVI_UPPER = 2,
  FVI_INTERVAL = 3,
  FVI_ORDERED = 4,          /* x_1 = u_1, x_k = x_(k-1) + exp(u_k) */
  FVI_POSITIVE_ORDERED = 5, /* x_k = x_(k-1) + exp(u_k), x_0 = 0 */
  FVI_SOFTMAX_SIMPLEX = 6,  /* simplex[K]: x = softmax(u), u of K values (the scale sum(exp(u)) is an
                               auxiliary ~ gamma(K, 1), independent of x: docs/kernel-abi.md) */
  FVI_CHOLESKY_CORR = 7,    /* cholesky_factor_corr[K]: the K(K-1)/2 unconstrained values (rank 1);
                               the K x K factor is the quantity of the same name, so outputs leave
                               these values out (FVI_ABI_VERSION 9). A quantity's: it is declared
                               one, and is checked at each draw */
  FVI_CHOLESKY_COV = 8,     /* cholesky_factor_cov[M, N]: N(N+1)/2 + (M-N)N unconstrained values, the factor a
                               quantity (as FVI_CHOLESKY_CORR); a quantity's: lower triangular,
                               positive diagonal, checked at each draw */
  FVI_CORR_MATRIX = 9,      /* ... symmetric, unit diagonal, positive definite */
  FVI_COV_MATRIX = 10,      /* ... symmetric, positive definite */
  FVI_AFFINE = 11,          /* <offset=a, multiplier=b>: x = a + b u, a and b possibly parameters; the
                               value is the quantity of the same name, so outputs leave u out */
  FVI_UNIT_VECTOR = 12      /* unit_vector[K]: K unconstrained values, the vector u / |u| a quantity
                               (FVI_ABI_VERSION 10); a quantity's: of length 1, checked at each draw */
};

/* A parameter (or hyperparameter) as the user declared it: where it sits in its group and how
 * its unconstrained values map to the declared support. A bound is a literal (`lower`, `upper`)
 * or, when `lower_data` / `upper_data` is not empty, the value of that scalar data variable. */
typedef struct fvi_variable_info {
  const char* name;
  int group;      /* index into fvi_model.group_kinds */
  int transform;  /* fvi_transform: x = lower + exp(u), upper - exp(u), lower + (upper - lower) inv_logit(u),
                     or an ordered vector's running sums */
  double lower;
  double upper;
  const char* lower_data;
  const char* upper_data;
  int rank;       /* 0 scalar, 1 vector or row_vector, 2 matrix (arrays count their dimensions) */
  /* A global whose only prior is `x ~ normal(0, h)`, h a scalar `real<lower=0>` hyperparameter:
   * h's index in this table, so that an engine may measure x's q in h's units (its log-sds from
   * log h, its means as multiples of a power of h: a change of the optimiser's coordinates, not
   * of the model; FVI_ABI_VERSION 11). -1 otherwise. */
  int prior_scale;
  /* 1: a global matrix whose rows the likelihood sees only up to a shift (adding one number to
   * every element of a row changes only its prior's term: `categorical_logit(x * W + b)`, the
   * classes W's columns); 2: a vector or row_vector seen only up to one shift of all its
   * elements (b there); 0 otherwise. Its only prior is `W ~ normal(0, s)`, s one scale that
   * reads no random parameter, so q's means are best with zero mean across the classes there, and
   * an engine may put them so (compiler/analysis/class_shift.h; FVI_ABI_VERSION 12). */
  int class_shift;
  /* A global intercept b added to `x * W` (x silo data, W the global at index
   * centring_coefficient), where x and b are read nowhere else in the silos' terms: x's name, so
   * that an engine may fit b_c = b + xbar W at the silos' x - xbar (xbar its pooled column means)
   * and evaluate the priors at b = b_c - xbar W, a change of the fit's coordinates with unit
   * Jacobian (compiler/analysis/centring.h; FVI_ABI_VERSION 13). In a vertical model,
   * "silo_sum" and -1: a real b added to `silo_sum(...)` alone, which an engine may fit as
   * b_c = b + the mean over rows of the silos' summed partial predictors. A local b of rank 1
   * with a W of rank 0 or 1 is a vector of groups' intercepts (read as b[g]), each element
   * shifted by the same xbar W. "" and -1 otherwise. */
  const char* centring_data;
  int centring_coefficient;
  /* The same intercept's further products, `b + x * W + v * c` (FVI_ABI_VERSION 14): centring_more
   * pairs of silo data (centring_more_data[j]) and coefficient index (centring_more_coefficients[j]),
   * each read as centring_data and centring_coefficient are, each data read only there; then
   * b_c = b + xbar W + vbar c, every x at its own pooled column means. A pair whose coefficient
   * is an earlier pair's (FVI_ABI_VERSION 16) is that product's companion: the same W with another
   * x of its columns, each read in other sums of b (every sum holding W once), centred together at
   * their pooled column means: one shift. 0 and nulls otherwise. */
  int centring_more;
  const char* const* centring_more_data;
  const int* centring_more_coefficients;
  /* A silo's local vector of groups' intercepts of their own local slopes (FVI_ABI_VERSION 15):
   * `b[g] + W[g] .* x` (W a local vector of the groups' slopes indexed as b is) or `b[g] + W * x` (W
   * a local real), x the silo vector centring_data, W at centring_coefficient: the name of the silo
   * int array g giving each row's group (1-based), so that a silo may fit b_c[c] = b[c] + xbar_c W[c]
   * (or W), xbar_c the mean of x over its rows of group c, evaluating every term at the written b.
   * It applies to b's products whose coefficient is a local; "" otherwise. */
  const char* centring_group;
} fvi_variable_info;

/* The model's data declarations (docs/kernel-abi.md, "Data declarations"): what the generated
 * programs check each party's data against before inference starts (fvi/data/validate.h). Sizes
 * and bounds are expressions over data ints and reals: numbers, names, + - * / (int / int
 * truncates, as in Stan) and parentheses, e.g. "N", "2*D + 1", "(D*D + D)/2", "K", "-1.5". An
 * empty string is a size or bound the generated code cannot spell: it is not checked. */
enum fvi_data_party { FVI_DATA_PUBLIC = 0, FVI_DATA_SERVER = 1, FVI_DATA_SILO = 2, FVI_DATA_SPLIT = 3 };
/* A vector's declared structure: simplex[K] (non-negative, summing to 1), ordered[K] (strictly
 * increasing), positive_ordered[K] (strictly increasing from at least 0). */
enum fvi_vector_structure { FVI_PLAIN = 0, FVI_SIMPLEX = 1, FVI_ORDERED_VECTOR = 2, FVI_POSITIVE_ORDERED_VECTOR = 3 };

typedef struct fvi_data_declaration {
  const char* name;
  int party;                /* fvi_data_party: data, server data, silo data, split data */
  int is_int;               /* int or array of int: every value a whole number */
  int row_vector;           /* a row_vector (not in an array): its tensor is 1 x n */
  int structure;            /* fvi_vector_structure */
  int rank;                 /* the number of dims: array dims first, then the vector's or matrix's */
  const char* const* dims;  /* rank size expressions */
  const char* lower;        /* "" when unbounded below */
  const char* upper;        /* "" when unbounded above */
  const char* declaration;  /* as written, for messages: "array[N] int<lower=0, upper=1> y" */
  int line;                 /* its line in the model */
} fvi_data_declaration;

/* A size equality the compiler could not decide, checked once the data is read:
 * `left` and `right` must be equal where `what` (e.g. "the inner dimensions of '*'") needs it. */
typedef struct fvi_size_check {
  const char* left;
  const char* right;
  const char* what;
  int line;
} fvi_size_check;

typedef struct fvi_data_table {
  int declaration_count;
  const fvi_data_declaration* declarations;  /* in declaration order */
  int size_check_count;
  const fvi_size_check* size_checks;
  /* Transformed data built by statements, computed when a party's data is read (after it is
   * validated): the program of the statements each party runs, fvic's S-expression text
   * (fvi/data/transformed_data.h); NULL or "" for none. Indexed by fvi_data_party (public, server,
   * silo). */
  const char* transformed_data[3];
} fvi_data_table;

/* A declaration of `transformed parameters` or `generated quantities` (docs/kernel-abi.md,
 * "Quantities"): its value at each draw, computed after the fit by the party that may read what it
 * reads. create(factor) binds it to that party's data (factor >= factor_count: quantities are
 * numbered after the factors, which engines iterate); forward() takes the groups it reads, as a
 * factor does, and outputs its value per draw (rows x cols, elements column-major). It has no
 * gradient. A declared bound is checked by the runtime at every draw. */
enum fvi_quantity_block { FVI_TRANSFORMED_PARAMETERS = 0, FVI_GENERATED_QUANTITIES = 1 };

typedef struct fvi_quantity_info {
  const char* name;
  int block;        /* fvi_quantity_block */
  int owner;        /* fvi_owner: FVI_SERVER (globals, public and server data), FVI_SILO, FVI_SPLIT_SILO */
  int factor;       /* its index for create() */
  int group_count;  /* input groups read, in forward() order */
  const int* groups;
  int rank;         /* 0 scalar, 1 vector / row_vector / 1-D array, 2 matrix */
  int transform;    /* fvi_transform of its declared bounds (FVI_IDENTITY: none); bounds as for variables */
  double lower;
  double upper;
  const char* lower_data;
  const char* upper_data;
  int aggregate;    /* 1: `t = silo_sum(e)`: owner FVI_SILO computes its part e (a scalar), the server
                     * adds up the silos' parts at its own draws */
} fvi_quantity_info;

/* A sparse GP regression, `y ~ sparse_gp_normal(x, Z, alpha, rho, sigma)` (docs/kernel-abi.md,
 * "Sparse GPs"; seed 003). Its likelihood is not a factor: the runtime's fvi/gp computes each
 * silo's variational bound from the names below. Each of Z, alpha, rho and sigma is a global
 * parameter (alpha, rho and sigma declared <lower=0>), a hyperparameter (Z only: one point
 * estimate, averaged by the server), a variable of the public data, or a number. */
enum fvi_gp_argument_kind { FVI_GP_PARAMETER = 0, FVI_GP_HYPERPARAMETER = 1, FVI_GP_DATA = 2, FVI_GP_NUMBER = 3 };
typedef struct fvi_gp_argument {
  const char* name; /* the variable's name; "" for a number */
  int kind;         /* fvi_gp_argument_kind */
  double value;     /* a number's value */
} fvi_gp_argument;
typedef struct fvi_sparse_gp {
  const char* outcome; /* silo data: vector[N] */
  const char* inputs;  /* silo data: matrix[N, D], array[N] vector[D] or array[N] real (D = 1) */
  fvi_gp_argument inducing, scale, lengthscale, noise; /* Z (M x D), alpha, rho (real or vector[D]), sigma */
  int line;
} fvi_sparse_gp;

typedef struct fvi_model {
  int abi_version; /* FVI_ABI_VERSION */
  const char* name;
  int group_count;
  const int* group_kinds;         /* each group's fvi_group, in the model's group order */
  const int* group_varies;        /* 1: S draws (sampled); 0: one value (point estimate) */
  int factor_count;
  const fvi_factor_info* factors;

  /* The number of unconstrained values in a group, from the sizes in `data`. */
  int (*group_size)(int group, const fvi_data* data, int64_t* size, fvi_error* error);
  /* Binds a factor to its party's data (checked against the declared shapes). */
  void* (*create)(int factor, const fvi_data* data, fvi_error* error);
  /* Evaluates the factor on rows [batch_begin, batch_begin + batch_count) of its observations
   * (batch_count < 0: all rows) for the draws in `inputs` (one tensor per group read, size x 1).
   * `output` is set to point at the factor's result, owned by the state: a density is 1 x 1,
   * a likelihood or contribution n x 1, each with the inputs' draws. */
  int (*forward)(void* state, int64_t batch_begin, int64_t batch_count, const fvi_tensor* inputs,
                 fvi_tensor* output, fvi_error* error);
  /* After forward(): the gradient of sum(seed .* output) (+ sum(seed_k .* argument_k) for a
   * likelihood) with respect to each input group, written into `gradients` (caller-allocated,
   * shaped like the inputs; overwritten). A NULL seed counts as zero. */
  int (*backward)(void* state, const fvi_tensor* const* seeds, fvi_tensor* gradients, fvi_error* error);
  /* After forward(), for a likelihood: values[0] is the outcome (the rows of the batch) and
   * values[k], k = 1 .. seed_count - 1, the distribution's k-th argument, as the kernel computed
   * them (a constant argument may be 1 x 1 with one draw: it broadcasts). Views into the state,
   * valid until the next call. Robust losses are computed from these by the runtime. */
  int (*arguments)(void* state, fvi_tensor* values, fvi_error* error);
  void (*destroy)(void* state);

  /* The declared parameters, in group order. variable_shape gives the i-th one's offset in its
   * group and its dimensions (rows x cols, elements column-major; dims[0..rank) as declared). */
  int variable_count;
  const fvi_variable_info* variables;
  int (*variable_shape)(int variable, const fvi_data* data, int64_t* offset, int64_t* dims, fvi_error* error);

  /* Like create(), but the factor computes in float32 (`precision = float32`): data are converted
   * to float once here, inputs and seeds on each call, outputs, arguments and gradients back to
   * double (views into the state, as for create()). Every other call is the same. */
  void* (*create_float32)(int factor, const fvi_data* data, fvi_error* error);

  /* Like forward(), for a mean-field Gaussian family: for each input group (fvi_factor_info.groups
   * order) the engine passes the variational mean and standard deviation (size x 1, one draw)
   * instead of draws, the number of draws S and a noise key. The kernel draws its own noise
   * (fvi/kernel/noise.h: Philox, a pure function of the key, the group or product, and the
   * element) and evaluates S draws: where a parameter enters only through a product with data
   * (x * W) it samples the product's Gaussian directly (local reparameterisation: mean x*mu,
   * variance x^2*sd^2, one normal per row, column and draw, the same for a row whatever the
   * minibatch), elsewhere theta = mean + sd .* eps (the group's noise is the same in every factor
   * called with one key). A point-estimated group (group_varies = 0) passes its value as the mean
   * and sds[g].data = NULL (or sds = NULL when no group has a sd). The output has S draws (one if
   * nothing is sampled); arguments() works after this call as after forward(). */
  int (*forward_meanfield)(void* state, int64_t batch_begin, int64_t batch_count, const fvi_tensor* means,
                           const fvi_tensor* sds, int64_t draws, uint64_t noise_key, fvi_tensor* output,
                           fvi_error* error);
  /* After forward_meanfield(): the gradient of sum(seed .* output) + sum(seed_k .* argument_k),
   * summed over the draws, with respect to each group's mean and sd, written into caller-allocated
   * size x 1 tensors (overwritten). d_sds may be NULL, or d_sds[g].data NULL for a group without
   * a sd. A NULL seed counts as zero. backward() is not valid after forward_meanfield(). */
  int (*backward_meanfield)(void* state, const fvi_tensor* const* seeds, fvi_tensor* d_means, fvi_tensor* d_sds,
                            fvi_error* error);

  /* The data each party must give: every declaration of the data blocks with its shape, type
   * and bounds, and the size equalities to check (fvi/data/validate.h reads it). */
  const fvi_data_table* data_table;

  /* forward_meanfield and backward_meanfield with the means and sds, and their gradients, in
   * float: an engine that keeps q in float (precision = float32) passes it without converting
   * to double, and a create_float32 state reads it and writes its gradient without converting
   * either. The values are the same as the double calls' given the same (float) means and sds.
   * Valid on either kind of state; a backward_meanfield_f32 may follow either forward. */
  int (*forward_meanfield_f32)(void* state, int64_t batch_begin, int64_t batch_count, const fvi_tensor_f32* means,
                               const fvi_tensor_f32* sds, int64_t draws, uint64_t noise_key, fvi_tensor* output,
                               fvi_error* error);
  int (*backward_meanfield_f32)(void* state, const fvi_tensor* const* seeds, fvi_tensor_f32* d_means,
                                fvi_tensor_f32* d_sds, fvi_error* error);

  /* Transformed parameters and generated quantities, in declaration order. */
  int quantity_count;
  const fvi_quantity_info* quantities;
  /* A quantity's values (as forward(state, 0, -1, ...)) with its random draws (`dist_rng`) made
   * from `noise_key`: draw j of each call's stream is a pure function of (key, stream, j). `draws`
   * is the number of posterior draws: a random draw whose arguments are all constant
   * (`normal_rng(0, 1)`) is made that many times, not once. */
  int (*forward_quantity)(void* state, const fvi_tensor* inputs, int64_t draws, uint64_t noise_key,
                          fvi_tensor* output, fvi_error* error);

  /* The model's sparse GP likelihood, or NULL (no such model has any other likelihood). */
  const fvi_sparse_gp* sparse_gp;
} fvi_model;

#ifdef __cplusplus
}
#endif

#endif /* FVI_KERNEL_ABI_H */
