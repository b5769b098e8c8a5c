// FP64 oracles of the transformer's layers and model, written apart from
// src/nn: explicit loops per row, sequence, head, query and key, the causal
// mask as a -inf score, in double from the layers' float parameter values
// (read at every call, so a perturbed parameter is seen).
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "nn/causal_self_attention.h"
#include "nn/embedding.h"
#include "nn/layer_norm_layer.h"
#include "nn/linear.h"
#include "nn/positional_embedding.h"
#include "nn/sequential.h"
#include "nn/transformer_block.h"
#include "ops/gelu_fp64.h"
#include "refs/layer_norm_ref.h"

namespace mpverify::test_support {

struct Dims {
  int B, T, D, H;  // sequences, positions, d_model, heads
  int rows() const { return B * T; }
};

inline const std::vector<float>& values(const nn::Layer& layer, std::size_t i) {
  return const_cast<nn::Layer&>(layer).parameters().at(i)->value;
}

inline std::vector<double> linear_fp64(const nn::Layer& layer, const std::vector<double>& in, int rows) {
  const auto& l = dynamic_cast<const nn::Linear&>(layer);
  const auto& w = values(l, 0);
  const auto& b = values(l, 1);
  const auto I = static_cast<std::size_t>(l.in()), O = static_cast<std::size_t>(l.out());
  std::vector<double> out(static_cast<std::size_t>(rows) * O);
  for (std::size_t i = 0; i < static_cast<std::size_t>(rows); ++i)
    for (std::size_t o = 0; o < O; ++o) {
      double s = b[o];
      for (std::size_t k = 0; k < I; ++k) s += static_cast<double>(w[o * I + k]) * in[i * I + k];
      out[i * O + o] = s;
    }
  return out;
}

inline std::vector<double> attention_fp64(const nn::CausalSelfAttention& layer, const std::vector<double>& x,
                                          const Dims& n) {
  const auto proj = layer.projections();
  const int hd = n.D / n.H;
  const auto q = linear_fp64(*proj[0], x, n.rows()), k = linear_fp64(*proj[1], x, n.rows()),
             v = linear_fp64(*proj[2], x, n.rows());
  std::vector<double> context(x.size(), 0.0);
  auto at = [&](int b, int t, int col) { return static_cast<std::size_t>((b * n.T + t) * n.D + col); };
  for (int b = 0; b < n.B; ++b)
    for (int h = 0; h < n.H; ++h)
      for (int i = 0; i < n.T; ++i) {
        std::vector<double> s(static_cast<std::size_t>(n.T));
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < n.T; ++j) {
          double dotp = 0;
          for (int c = 0; c < hd; ++c) dotp += q[at(b, i, h * hd + c)] * k[at(b, j, h * hd + c)];
          s[static_cast<std::size_t>(j)] = j <= i ? dotp / std::sqrt(hd) : -std::numeric_limits<double>::infinity();
          m = std::max(m, s[static_cast<std::size_t>(j)]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int j = 0; j < n.T; ++j)
          for (int c = 0; c < hd; ++c)
            context[at(b, i, h * hd + c)] += s[static_cast<std::size_t>(j)] / sum * v[at(b, j, h * hd + c)];
      }
  return linear_fp64(*proj[3], context, n.rows());
}

inline std::vector<double> layer_norm_fp64(const nn::Layer& layer, const std::vector<double>& x, const Dims& n) {
  const std::vector<double> g(values(layer, 0).begin(), values(layer, 0).end()),
      b(values(layer, 1).begin(), values(layer, 1).end());
  return refs::layer_norm_fp64({n.rows(), n.D}, {}, x, g, b).y;
}

// h = x + attn(ln1(x)); y = h + fc2(gelu(fc1(ln2(h)))).
inline std::vector<double> block_fp64(const nn::TransformerBlock& block, const std::vector<double>& x, const Dims& n) {
  const auto sub = block.sublayers();  // ln1, attn, ln2, fc1, gelu, fc2
  const auto a = attention_fp64(block.attention(), layer_norm_fp64(*sub[0], x, n), n);
  std::vector<double> h(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) h[i] = x[i] + a[i];
  auto u = linear_fp64(*sub[3], layer_norm_fp64(*sub[2], h, n), n.rows());
  for (double& v : u) v = ops::gelu_fp64(v);
  const auto m = linear_fp64(*sub[5], u, n.rows());
  for (std::size_t i = 0; i < x.size(); ++i) h[i] += m[i];
  return h;
}

// The whole model (nn::make_transformer's layout) on token ids: the logits.
inline std::vector<double> transformer_fp64(const nn::Sequential& model, const std::vector<int>& ids, const Dims& n) {
  const auto& layers = model.layers();
  const auto& tok = dynamic_cast<const nn::Embedding&>(*layers.front());
  const auto D = static_cast<std::size_t>(n.D), block = static_cast<std::size_t>(n.T) * D;
  std::vector<double> x(ids.size() * D);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::size_t j = 0; j < D; ++j)
      x[i * D + j] = static_cast<double>(values(tok, 0)[static_cast<std::size_t>(ids[i]) * D + j]) +
                     values(*layers[1], 0)[(i * D + j) % block];
  for (std::size_t l = 2; l + 2 < layers.size(); ++l)
    x = block_fp64(dynamic_cast<const nn::TransformerBlock&>(*layers[l]), x, n);
  return linear_fp64(*layers.back(), layer_norm_fp64(*layers[layers.size() - 2], x, n), n.rows());
}

}  // namespace mpverify::test_support
