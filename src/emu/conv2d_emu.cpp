#include "emu/conv2d_emu.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "emu/quantize.h"

namespace mpverify::emu {

namespace {

// Writes columns [first, first + width) of the B operand, row-major
// (terms x width), into out.
using FillColumns = std::function<void(int first, int width, float* out)>;
// Receives columns [first, first + width) of C, row-major (rows x width).
using StoreColumns = std::function<void(int first, int width, const float* c)>;

// The sites of one convolution: where the accumulation steps (fp16
// accumulation only, as gemm.accumulate) and the output roundings count.
struct Sites {
  Counters* accumulate;
  Counters* output;
};

// C (rows x columns) = A (rows x terms) B (terms x columns) under the policy's
// accumulation, rounded to policy.output; B built and C taken a block of
// columns at a time: the GEMM's tile kernels stream all of B for every few
// rows of A, so a block of B that stays in cache (about 256 KiB, whole
// 32-column tiles) keeps them fast. A block changes no element's sum (each is
// still one reduction over all terms, in order) nor its one rounding.
// The operands hold values already rounded (and counted) once by the caller;
// gemm_emu rounds them again, which changes nothing, into a scratch set whose
// gemm.a and gemm.b are dropped; gemm.accumulate and gemm.c are kept.
void blocked_gemm(int rows, int terms, int columns, std::span<const float> a, const GemmPolicy& policy,
                  const Sites& sites, const FillColumns& fill, const StoreColumns& store) {
  const int block = std::min(columns, std::max(32, (1 << 16) / std::max(terms, 1) / 32 * 32));
  std::vector<float> b(static_cast<std::size_t>(terms) * block), c(static_cast<std::size_t>(rows) * block);
  for (int first = 0; first < columns; first += block) {
    const int width = std::min(block, columns - first);
    const std::size_t b_size = static_cast<std::size_t>(terms) * width, c_size = static_cast<std::size_t>(rows) * width;
    fill(first, width, b.data());
    const GemmShape g{rows, width, terms};
    if (sites.output == nullptr) {
      gemm_emu(g, a, std::span(b).first(b_size), std::span(c).first(c_size), policy, nullptr);
    } else {
      CounterSet scratch;
      gemm_emu(g, a, std::span(b).first(b_size), std::span(c).first(c_size), policy, &scratch);
      if (const Counters* steps = scratch.find("gemm.accumulate"); steps && sites.accumulate) *sites.accumulate += *steps;
      *sites.output += *scratch.find("gemm.c");
    }
    store(first, width, c.data());
  }
}

Sites sites_of(CounterSet* counters, const GemmPolicy& policy, const std::string& op, const char* output) {
  if (counters == nullptr) return {nullptr, nullptr};
  return {policy.accumulation == Accumulation::fp16 ? &counters->at(op + ".accumulate") : nullptr,
          &counters->at(op + "." + output)};
}

std::size_t at(int a, int b, int c, int d, int B, int C, int D) {
  return ((static_cast<std::size_t>(a) * B + b) * C + c) * D + d;
}

// A column of im2col: the window of output position (oh, ow) of one image,
// as the offset of its image in x and its top-left input row and column.
struct Window {
  std::size_t image;
  int ih0, iw0;
};

std::vector<Window> windows(const Conv2dShape& s, int first, int width) {
  const int P = s.p(), Q = s.q();
  std::vector<Window> out;
  for (int j = first; j < first + width; ++j) {
    const int img = j / (P * Q), oh = j % (P * Q) / Q, ow = j % Q;
    out.push_back({at(img, 0, 0, 0, s.c, s.h, s.w), oh * s.stride - s.pad, ow * s.stride - s.pad});
  }
  return out;
}

// The value under tap (ri, si) of the window in channel ci: 0 in the padding.
float tap(const Conv2dShape& s, const float* x, const Window& win, int ci, int ri, int si) {
  const int ih = win.ih0 + ri, iw = win.iw0 + si;
  if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) return 0.0f;
  return x[win.image + (static_cast<std::size_t>(ci) * s.h + ih) * s.w + iw];
}

// A position in a batch: image, row, column.
struct Position {
  int img, row, col;
};

// Positions [first, first + width) of the list (image, row in rows, column in cols), in that order.
std::vector<Position> positions(int first, int width, const std::vector<int>& rows, const std::vector<int>& cols) {
  std::vector<Position> out;
  const int per_row = static_cast<int>(cols.size()), per_image = static_cast<int>(rows.size()) * per_row;
  for (int j = first; j < first + width; ++j)
    out.push_back({j / per_image, rows[(j % per_image) / per_row], cols[j % per_row]});
  return out;
}

// The taps of one stride phase along an axis: t with t mod stride == phase.
std::vector<int> phase_taps(int taps, int stride, int phase) {
  std::vector<int> out;
  for (int t = phase; t < taps; t += stride) out.push_back(t);
  return out;
}

// The input positions of a phase: i in [0, size) with (i + pad) mod stride == phase.
std::vector<int> phase_positions(int size, int stride, int pad, int phase) {
  std::vector<int> out;
  for (int i = 0; i < size; ++i)
    if ((i + pad) % stride == phase) out.push_back(i);
  return out;
}

}  // namespace

void conv2d_forward_emu(const Conv2dShape& s, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y, const GemmPolicy& policy, CounterSet* counters) {
  s.check(x.size(), wgt.size(), y.size());
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "conv2d.x"));
  const std::vector<float> wr = quantized_copy(wgt, policy.input, site_counters(counters, "conv2d.w"));
  const int P = s.p(), Q = s.q(), crs = static_cast<int>(s.forward_terms());
  // W (k x crs) times im2col: row (ci, ri, si), column (image, oh, ow) of the whole batch.
  blocked_gemm(
      s.k, crs, s.n * P * Q, wr, policy, sites_of(counters, policy, "conv2d", "y"),
      [&](int first, int width, float* out) {
        const auto wins = windows(s, first, width);
        for (int ci = 0; ci < s.c; ++ci)
          for (int ri = 0; ri < s.r; ++ri)
            for (int si = 0; si < s.s; ++si)
              for (const Window& win : wins) *out++ = tap(s, xr.data(), win, ci, ri, si);
      },
      [&](int first, int width, const float* c) {
        for (int kk = 0; kk < s.k; ++kk)
          for (int j = first; j < first + width; ++j)
            y[at(j / (P * Q), kk, 0, j % (P * Q), s.k, 1, P * Q)] = *c++;
      });
}

void conv2d_backward_data_emu(const Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx, const GemmPolicy& policy, CounterSet* counters) {
  s.check(dx.size(), wgt.size(), dy.size(), "dx", "weight", "dy");
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "conv2d_backward_data.dy"));
  const std::vector<float> wr = quantized_copy(wgt, policy.input, site_counters(counters, "conv2d_backward_data.w"));
  const Sites sites = sites_of(counters, policy, "conv2d_backward_data", "dx");
  const int P = s.p(), Q = s.q();
  std::fill(dx.begin(), dx.end(), 0.0f);
  std::size_t empty_sums = 0;  // elements of phases that no tap reaches: 0
  for (int pr = 0; pr < s.stride; ++pr)
    for (int ps = 0; ps < s.stride; ++ps) {
      const std::vector<int> rt = phase_taps(s.r, s.stride, pr), st = phase_taps(s.s, s.stride, ps);
      const std::vector<int> rows = phase_positions(s.h, s.stride, s.pad, pr);
      const std::vector<int> cols = phase_positions(s.w, s.stride, s.pad, ps);
      if (rt.empty() || st.empty()) {
        empty_sums += static_cast<std::size_t>(s.n) * s.c * rows.size() * cols.size();
        continue;
      }
      if (rows.empty() || cols.empty()) continue;
      const int nr = static_cast<int>(rt.size()), ns = static_cast<int>(st.size()), terms = s.k * nr * ns;
      // A = W_ab^T: row ci, column (kk, i, j) holds wgt[kk, ci, rt[i], st[j]].
      std::vector<float> a(static_cast<std::size_t>(s.c) * terms);
      for (int ci = 0; ci < s.c; ++ci)
        for (int kk = 0; kk < s.k; ++kk)
          for (int i = 0; i < nr; ++i)
            for (int j = 0; j < ns; ++j)
              a[(static_cast<std::size_t>(ci) * s.k + kk) * nr * ns + i * ns + j] = wr[at(kk, ci, rt[i], st[j], s.c, s.r, s.s)];
      // B: row (kk, i, j), column (image, ih, iw) of the phase's input
      // positions holds dy at the output position whose tap (rt[i], st[j])
      // lands on (ih, iw); 0 past dy's border.
      blocked_gemm(
          s.c, terms, s.n * static_cast<int>(rows.size() * cols.size()), a, policy, sites,
          [&](int first, int width, float* out) {
            const auto pos = positions(first, width, rows, cols);
            for (int kk = 0; kk < s.k; ++kk)
              for (int i = 0; i < nr; ++i)
                for (int j = 0; j < ns; ++j)
                  for (const Position& p : pos) {
                    const int oh = (p.row + s.pad - rt[i]) / s.stride, ow = (p.col + s.pad - st[j]) / s.stride;
                    const bool inside = p.row + s.pad >= rt[i] && oh < P && p.col + s.pad >= st[j] && ow < Q;
                    *out++ = inside ? dyr[at(p.img, kk, oh, ow, s.k, P, Q)] : 0.0f;
                  }
          },
          [&](int first, int width, const float* c) {
            const auto pos = positions(first, width, rows, cols);
            for (int ci = 0; ci < s.c; ++ci)
              for (const Position& p : pos) dx[at(p.img, ci, p.row, p.col, s.c, s.h, s.w)] = *c++;
          });
    }
  if (sites.output && empty_sums > 0) {  // their 0 is still an output rounded (exactly) to the format
    const std::vector<float> zeros(empty_sums, 0.0f);
    std::vector<float> out(empty_sums);
    quantize(zeros, out, QuantizeSpec{policy.output}, sites.output);
  }
}

void conv2d_backward_filter_emu(const Conv2dShape& s, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw, const GemmPolicy& policy, CounterSet* counters) {
  s.check(x.size(), dw.size(), dy.size(), "x", "dw", "dy");
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "conv2d_backward_filter.x"));
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "conv2d_backward_filter.dy"));
  const int P = s.p(), Q = s.q(), crs = static_cast<int>(s.forward_terms());
  const int npq = static_cast<int>(s.backward_filter_terms());
  const std::size_t pq = static_cast<std::size_t>(P) * Q;
  // A = dy as k x (image, p, q): one reduction over the whole batch.
  std::vector<float> a(static_cast<std::size_t>(s.k) * npq);
  for (int img = 0; img < s.n; ++img)
    for (int kk = 0; kk < s.k; ++kk)
      std::copy_n(dyr.data() + at(img, kk, 0, 0, s.k, P, Q), pq, a.data() + static_cast<std::size_t>(kk) * npq + img * pq);
  const std::vector<Window> wins = windows(s, 0, npq);
  // B = im2col(x)^T: row (image, oh, ow), column (ci, ri, si).
  blocked_gemm(
      s.k, npq, crs, a, policy, sites_of(counters, policy, "conv2d_backward_filter", "dw"),
      [&](int first, int width, float* out) {
        struct Tap {
          int ci, ri, si;
        };
        std::vector<Tap> taps;
        for (int col = first; col < first + width; ++col) taps.push_back({col / (s.r * s.s), col / s.s % s.r, col % s.s});
        for (const Window& win : wins)
          for (const Tap& t : taps) *out++ = tap(s, xr.data(), win, t.ci, t.ri, t.si);
      },
      [&](int first, int width, const float* c) {
        for (int kk = 0; kk < s.k; ++kk)
          for (int col = first; col < first + width; ++col) dw[static_cast<std::size_t>(kk) * crs + col] = *c++;
      });
}

}  // namespace mpverify::emu
