#pragma once
// Kernel operations (ops.h) on images: 2-D convolution (im2col and one matrix product per draw)
// and max / average pooling, each with its adjoints (and max pooling's tangent).
//
// A batch of images is a matrix with one image per row, flattened as PyTorch's x.view(N, -1)
// flattens an N x C x H x W tensor: row n, column c*H*W + i*W + j holds channel c's pixel (i, j).
// A convolution's weight is C_out x (C*k*k), PyTorch's weight.view(C_out, -1); its output is
// N x (C_out*H_out*W_out) in the same layout, stride 1, `padding` zeros on every side.
#include <string>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

struct ConvGeometry {
  Eigen::Index channels = 1, height = 1, width = 1, kernel = 1, padding = 0;

  Eigen::Index out_height() const { return height + 2 * padding - kernel + 1; }
  Eigen::Index out_width() const { return width + 2 * padding - kernel + 1; }
  Eigen::Index positions() const { return out_height() * out_width(); }
  Eigen::Index patch() const { return channels * kernel * kernel; }
  Eigen::Index pixels() const { return channels * height * width; }
};

namespace conv_detail {

inline void check(const ConvGeometry& g, Eigen::Index x_cols, Eigen::Index w_cols) {
  if (g.channels < 1 || g.kernel < 1 || g.padding < 0 || g.out_height() < 1 || g.out_width() < 1)
    throw ShapeError("conv2d: a " + std::to_string(g.kernel) + "x" + std::to_string(g.kernel) + " kernel with padding " +
                     std::to_string(g.padding) + " does not fit a " + std::to_string(g.height) + "x" +
                     std::to_string(g.width) + " image");
  if (x_cols != g.pixels())
    throw ShapeError("conv2d: images of " + std::to_string(x_cols) + " values, not channels x height x width = " +
                     std::to_string(g.pixels()));
  if (w_cols != g.patch())
    throw ShapeError("conv2d: a weight of " + std::to_string(w_cols) + " columns, not channels x kernel x kernel = " +
                     std::to_string(g.patch()));
}

// im2col with the images minor: the (N*P) x patch() matrix whose row q*N + n holds the patch of
// image n under output position q (P positions, row-major), column (c*k + a)*k + b its pixel
// (a, b) of channel c. In this order each run of N entries is a column of x read whole (x is
// column-major), and the product with W' is N x (C_out*P) in the tensor's own layout: row q*N + n,
// column co sits at co*N*P + q*N + n, which is output (n, co*P + q). Padding reads as zeros.
// visit(column, first_row, pixel): rows [first_row, first_row + N) of `column` pair with x's
// column `pixel`.
template <class Visit>
void for_each_patch_run(const ConvGeometry& g, Eigen::Index n_images, Visit&& visit) {
  const Eigen::Index Wo = g.out_width(), Ho = g.out_height(), k = g.kernel;
  for (Eigen::Index c = 0; c < g.channels; ++c)
    for (Eigen::Index a = 0; a < k; ++a)
      for (Eigen::Index b = 0; b < k; ++b) {
        const Eigen::Index column = (c * k + a) * k + b;
        for (Eigen::Index i = 0; i < Ho; ++i) {
          const Eigen::Index si = i + a - g.padding;
          if (si < 0 || si >= g.height) continue;
          for (Eigen::Index j = 0; j < Wo; ++j) {
            const Eigen::Index sj = j + b - g.padding;
            if (sj < 0 || sj >= g.width) continue;
            visit(column, (i * Wo + j) * n_images, c * g.height * g.width + si * g.width + sj);
          }
        }
      }
}

template <class XMat, class T = typename XMat::Scalar>
Mat<T> patches(const XMat& x, const ConvGeometry& g) {
  const Eigen::Index n = x.rows();
  Mat<T> out = Mat<T>::Zero(n * g.positions(), g.patch());
  for_each_patch_run(g, n, [&](Eigen::Index column, Eigen::Index first, Eigen::Index pixel) {
    out.col(column).segment(first, n) = x.col(pixel);
  });
  return out;
}

// The adjoint of patches: every patch entry added back to the pixel it was read from.
template <class Out, class T>
void add_patches(const Mat<T>& cols, const ConvGeometry& g, Out&& x) {
  const Eigen::Index n = x.rows();
  for_each_patch_run(g, n, [&](Eigen::Index column, Eigen::Index first, Eigen::Index pixel) {
    x.col(pixel) += cols.col(column).segment(first, n);
  });
}

// Draw s of an N x (C_out*P) value as the (N*P) x C_out matrix of the same memory.
template <class T>
Eigen::Map<const Mat<T>> by_position(const Tensor<T>& y, Eigen::Index s, Eigen::Index channels_out) {
  return {y.m.data() + (y.draws == 1 ? 0 : s) * y.size(), y.size() / channels_out, channels_out};
}

}  // namespace conv_detail

// conv2d(x, w): N x (C*H*W) images, C_out x (C*k*k) weights -> N x (C_out*H_out*W_out).
template <class T>
Tensor<T> conv2d(const Tensor<T>& x, const Tensor<T>& w, const ConvGeometry& g) {
  conv_detail::check(g, x.cols, w.cols);
  const Eigen::Index P = g.positions(), draws = joint_draws(x.draws, w.draws);
  Tensor<T> out = Tensor<T>::uninitialized(x.rows, w.rows * P, draws);
  if (x.draws == 1) {
    // Images that are data: every draw's weights side by side, one product whose (N*P) x
    // (C_out*S) result is the output's memory, draw after draw.
    const Mat<T> cols = conv_detail::patches(x.draw(0), g);
    Mat<T> weights(w.cols, w.rows * w.draws);
    for (Eigen::Index s = 0; s < w.draws; ++s) weights.middleCols(s * w.rows, w.rows) = w.draw(s).transpose();
    Eigen::Map<Mat<T>>(out.m.data(), x.rows * P, w.rows * draws).noalias() = cols * weights;
    return out;
  }
  for (Eigen::Index s = 0; s < draws; ++s)
    Eigen::Map<Mat<T>>(out.m.data() + s * out.size(), x.rows * P, w.rows).noalias() =
        conv_detail::patches(x.draw(s), g) * w.draw(s).transpose();
  return out;
}

// The adjoint of conv2d's images: each draw's G W put back where its patches came from, summed
// to `x_draws` draws.
template <class T>
Tensor<T> conv2d_grad_input(const Tensor<T>& g, const Tensor<T>& w, Eigen::Index x_draws, const ConvGeometry& geometry) {
  const Eigen::Index P = geometry.positions();
  if (g.cols != w.rows * P) throw ShapeError("the adjoint of conv2d's images from " + shape_string(g));
  if (x_draws != 1 && x_draws != g.draws) throw ShapeError("conv2d's images with " + std::to_string(x_draws) + " draws");
  Tensor<T> out(g.rows, geometry.pixels(), x_draws);
  for (Eigen::Index s = 0; s < joint_draws(g.draws, w.draws); ++s) {
    const Mat<T> cols = conv_detail::by_position(g, s, w.rows) * w.draw(s);
    conv_detail::add_patches(cols, geometry, out.draw(x_draws == 1 ? 0 : s));
  }
  return out;
}

// The adjoint of conv2d's weight: each draw's G' patches, summed to `w_draws` draws.
template <class T>
Tensor<T> conv2d_grad_weight(const Tensor<T>& x, const Tensor<T>& g, Eigen::Index w_draws, const ConvGeometry& geometry) {
  const Eigen::Index P = geometry.positions();
  if (x.cols != geometry.pixels() || g.rows != x.rows || g.cols % P != 0)
    throw ShapeError("the adjoint of conv2d's weight from " + shape_string(g) + " and images " + shape_string(x));
  const Eigen::Index channels_out = g.cols / P, draws = joint_draws(x.draws, g.draws);
  if (w_draws != 1 && w_draws != draws) throw ShapeError("conv2d's weight with " + std::to_string(w_draws) + " draws");
  Tensor<T> out(channels_out, geometry.patch(), w_draws);
  if (x.draws == 1) {
    // Images that are data: every draw's G' patches in one product, G's draws side by side.
    const Mat<T> products = Eigen::Map<const Mat<T>>(g.m.data(), g.rows * P, channels_out * g.draws).transpose() *
                            conv_detail::patches(x.draw(0), geometry);
    for (Eigen::Index s = 0; s < g.draws; ++s) out.draw(w_draws == 1 ? 0 : s) += products.middleRows(s * channels_out, channels_out);
    return out;
  }
  for (Eigen::Index s = 0; s < draws; ++s)
    out.draw(w_draws == 1 ? 0 : s).noalias() +=
        conv_detail::by_position(g, s, channels_out).transpose() * conv_detail::patches(x.draw(s), geometry);
  return out;
}

// ---- pooling: k x k windows at stride k over each channel (height and width divisible by k) ----

struct PoolGeometry {
  Eigen::Index channels = 1, height = 1, width = 1, size = 1;
  Eigen::Index out_height() const { return height / size; }
  Eigen::Index out_width() const { return width / size; }
  Eigen::Index pixels() const { return channels * height * width; }
  Eigen::Index out_pixels() const { return channels * out_height() * out_width(); }
};

namespace conv_detail {

// Checks the geometry and returns whether `kind` is "max" (else "avg"; any other name is refused).
inline bool check(const PoolGeometry& g, Eigen::Index x_cols, const std::string& kind) {
  const std::string what = kind + "_pool2d";
  if (kind != "max" && kind != "avg") throw ShapeError("no pooling named '" + kind + "'");
  if (g.size < 1 || g.height % g.size != 0 || g.width % g.size != 0)
    throw ShapeError(what + ": " + std::to_string(g.size) + "x" + std::to_string(g.size) + " windows do not tile a " +
                     std::to_string(g.height) + "x" + std::to_string(g.width) + " image");
  if (x_cols != g.pixels())
    throw ShapeError(what + ": images of " + std::to_string(x_cols) + " values, not channels x height x width = " +
                     std::to_string(g.pixels()));
  return kind == "max";
}

// Calls visit(n, out_column, in_columns...) for every window: in_column(a, b) is its pixel (a, b).
template <class Visit>
void for_each_window(const PoolGeometry& g, Eigen::Index n_images, Visit&& visit) {
  const Eigen::Index Ho = g.out_height(), Wo = g.out_width(), k = g.size;
  for (Eigen::Index c = 0; c < g.channels; ++c)
    for (Eigen::Index i = 0; i < Ho; ++i)
      for (Eigen::Index j = 0; j < Wo; ++j) {
        const Eigen::Index out_col = (c * Ho + i) * Wo + j, corner = c * g.height * g.width + i * k * g.width + j * k;
        auto in_col = [&](Eigen::Index a, Eigen::Index b) { return corner + a * g.width + b; };
        for (Eigen::Index n = 0; n < n_images; ++n) visit(n, out_col, in_col);
      }
}

// The column of the window's largest value in row n of x (the first of equal ones).
template <class XMat, class InCol>
Eigen::Index argmax(const XMat& x, Eigen::Index n, const InCol& in_col, Eigen::Index k) {
  Eigen::Index best = in_col(0, 0);
  for (Eigen::Index a = 0; a < k; ++a)
    for (Eigen::Index b = 0; b < k; ++b)
      if (x(n, in_col(a, b)) > x(n, best)) best = in_col(a, b);
  return best;
}

}  // namespace conv_detail

// max_pool2d ("max") or avg_pool2d ("avg"): N x (C*H*W) -> N x (C*(H/k)*(W/k)).
template <class T>
Tensor<T> pool2d(const std::string& kind, const Tensor<T>& x, const PoolGeometry& g) {
  const bool max = conv_detail::check(g, x.cols, kind);
  Tensor<T> out = Tensor<T>::uninitialized(x.rows, g.out_pixels(), x.draws);
  const T area = T(g.size * g.size);
  for (Eigen::Index s = 0; s < x.draws; ++s) {
    auto xs = x.draw(s);
    auto o = out.draw(s);
    conv_detail::for_each_window(g, x.rows, [&](Eigen::Index n, Eigen::Index col, const auto& in_col) {
      if (max) {
        o(n, col) = xs(n, conv_detail::argmax(xs, n, in_col, g.size));
        return;
      }
      T total = 0;
      for (Eigen::Index a = 0; a < g.size; ++a)
        for (Eigen::Index b = 0; b < g.size; ++b) total += xs(n, in_col(a, b));
      o(n, col) = total / area;
    });
  }
  return out;
}

// v's value where x is largest in each window: max pooling's Jacobian-vector product (v the tangent).
template <class T>
Tensor<T> max_pool2d_select(const Tensor<T>& x, const Tensor<T>& v, const PoolGeometry& g) {
  conv_detail::check(g, x.cols, "max");
  if (v.rows != x.rows || v.cols != x.cols) throw ShapeError("max_pool2d's tangent " + shape_string(v));
  const Eigen::Index draws = joint_draws(x.draws, v.draws);
  Tensor<T> out = Tensor<T>::uninitialized(x.rows, g.out_pixels(), draws);
  for (Eigen::Index s = 0; s < draws; ++s) {
    auto xs = x.draw(s);
    auto vs = v.draw(s);
    auto o = out.draw(s);
    conv_detail::for_each_window(g, x.rows, [&](Eigen::Index n, Eigen::Index col, const auto& in_col) {
      o(n, col) = vs(n, conv_detail::argmax(xs, n, in_col, g.size));
    });
  }
  return out;
}

// The adjoint of pool2d: g to each window's largest value (max) or spread evenly over it (avg),
// with x's draws.
template <class T>
Tensor<T> pool2d_grad(const std::string& kind, const Tensor<T>& x, const Tensor<T>& g, const PoolGeometry& geometry) {
  const bool max = conv_detail::check(geometry, x.cols, kind);
  if (g.rows != x.rows || g.cols != geometry.out_pixels() || (g.draws != x.draws && g.draws != 1))
    throw ShapeError("the adjoint of " + kind + "_pool2d from " + shape_string(g) + " for " + shape_string(x));
  Tensor<T> out(x.rows, x.cols, x.draws);
  const T area = T(geometry.size * geometry.size);
  for (Eigen::Index s = 0; s < x.draws; ++s) {
    auto xs = x.draw(s);
    auto gs = g.draw(s);
    auto o = out.draw(s);
    conv_detail::for_each_window(geometry, x.rows, [&](Eigen::Index n, Eigen::Index col, const auto& in_col) {
      if (max) {
        o(n, conv_detail::argmax(xs, n, in_col, geometry.size)) += gs(n, col);
        return;
      }
      for (Eigen::Index a = 0; a < geometry.size; ++a)
        for (Eigen::Index b = 0; b < geometry.size; ++b) o(n, in_col(a, b)) += gs(n, col) / area;
    });
  }
  return out;
}

}  // namespace fvi::kernel
