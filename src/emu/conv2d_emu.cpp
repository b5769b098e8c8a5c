#include "emu/conv2d_emu.h"
#include "formats/fp_environment.h"

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

// The sites of one convolution: where the accumulation steps (every model but
// the Fasi et al. block one, as gemm.accumulate) and the output roundings count.
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
// The operands hold values already rounded (and counted) once by the caller,
// so they go to gemm_emu_rounded_inputs; its gemm.accumulate and gemm.c
// counts are kept under the op's own sites.
void blocked_gemm(int rows, int terms, int columns, std::span<const float> a, const GemmPolicy& policy,
                  const Sites& sites, const FillColumns& fill, const StoreColumns& store) {
  const int block = std::min(columns, std::max(32, (1 << 16) / std::max(terms, 1) / 32 * 32));
  std::vector<float> b(static_cast<std::size_t>(terms) * block), c(static_cast<std::size_t>(rows) * block);
  for (int first = 0; first < columns; first += block) {
    const int width = std::min(block, columns - first);
    const std::size_t b_size = static_cast<std::size_t>(terms) * width, c_size = static_cast<std::size_t>(rows) * width;
    fill(first, width, b.data());
    const ops::GemmShape g{rows, width, terms};
    if (sites.output == nullptr) {
      gemm_emu_rounded_inputs(g, a, std::span(b).first(b_size), std::span(c).first(c_size), policy, nullptr);
    } else {
      CounterSet scratch;
      gemm_emu_rounded_inputs(g, a, std::span(b).first(b_size), std::span(c).first(c_size), policy, &scratch);
      if (const Counters* steps = scratch.find("gemm.accumulate"); steps && sites.accumulate) *sites.accumulate += *steps;
      *sites.output += *scratch.find("gemm.c");
    }
    store(first, width, c.data());
  }
}

Sites sites_of(CounterSet* counters, const GemmPolicy& policy, const std::string& op, const char* output) {
  if (counters == nullptr) return {nullptr, nullptr};
  // Every model counts its steps but the Fasi et al. block model, which has no counters.
  const bool steps_counted = policy.accumulation != Accumulation::tensor_core;
  return {steps_counted ? &counters->at(op + ".accumulate") : nullptr,
          &counters->at(op + "." + output)};
}

// The policy names the op's operands in order, (x, w), (dy, w), (x, dy): input is the first's format,
// b_format() the second's. Every GEMM below multiplies the second (as A) by the first (as B).
GemmPolicy second_operand_first(const GemmPolicy& p) {
  GemmPolicy q = p;
  q.input = p.b_format();
  q.input_b = p.input;
  return q;
}

std::size_t at(int a, int b, int c, int d, int B, int C, int D) {
  return ((static_cast<std::size_t>(a) * B + b) * C + c) * D + d;
}

// out[m] = row[first + m * stride] for m in [0, count), and 0 where that
// index falls outside [0, length): the padding. One output row's run of an
// im2col row, or of a gather of dy, at a time (the runs are what make the
// gathers cheap: a bounds check per run, not per element).
void gather_row(const float* row, int length, int first, int stride, int count, float* out) {
  // m with 0 <= first + m * stride < length: [lo, hi)
  auto ceil_div = [](int a, int b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
  const int lo = std::clamp(ceil_div(-first, stride), 0, count);
  const int hi = std::clamp(ceil_div(length - first, stride), lo, count);
  std::fill(out, out + lo, 0.0f);
  if (stride == 1) {
    std::copy(row + first + lo, row + first + hi, out + lo);
  } else {
    for (int m = lo; m < hi; ++m) out[m] = row[first + m * stride];
  }
  std::fill(out + hi, out + count, 0.0f);
}

// Row (ci, ri, si) of im2col(x) over the batch's columns [first, first +
// width) (image, oh, ow): the value under that tap of each window, 0 in the
// padding; one output row of an image per run.
void im2col_row(const ops::Conv2dShape& s, const float* x, int ci, int ri, int si, int first, int width, float* out) {
  const int P = s.p(), Q = s.q();
  for (int j = first, end = first + width; j < end;) {
    const int img = j / (P * Q), oh = j % (P * Q) / Q, ow = j % Q;
    const int run = std::min(Q - ow, end - j), ih = oh * s.stride - s.pad + ri;
    if (ih < 0 || ih >= s.h) std::fill(out, out + run, 0.0f);
    else gather_row(x + at(img, ci, ih, 0, s.c, s.h, s.w), s.w, ow * s.stride - s.pad + si, s.stride, run, out);
    out += run;
    j += run;
  }
}

// A column of im2col: the window of output position (oh, ow) of one image,
// as the offset of its image in x and its top-left input row and column.
struct Window {
  std::size_t image;
  int ih0, iw0;
};

std::vector<Window> windows(const ops::Conv2dShape& s, int first, int width) {
  const int P = s.p(), Q = s.q();
  std::vector<Window> out;
  for (int j = first; j < first + width; ++j) {
    const int img = j / (P * Q), oh = j % (P * Q) / Q, ow = j % Q;
    out.push_back({at(img, 0, 0, 0, s.c, s.h, s.w), oh * s.stride - s.pad, ow * s.stride - s.pad});
  }
  return out;
}

// The value under tap (ri, si) of the window in channel ci: 0 in the padding.
float tap(const ops::Conv2dShape& s, const float* x, const Window& win, int ci, int ri, int si) {
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

void conv2d_forward_emu(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> wgt,
                        std::span<float> y, const GemmPolicy& policy, CounterSet* counters) {
  formats::check_fp_environment("emu::conv2d_forward_emu");
  s.check(x.size(), wgt.size(), y.size());
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "conv2d.x"));
  const std::vector<float> wr = quantized_copy(wgt, policy.b_format(), site_counters(counters, "conv2d.w"));
  const int P = s.p(), Q = s.q(), crs = static_cast<int>(s.forward_terms());
  // W (k x crs) times im2col: row (ci, ri, si), column (image, oh, ow) of the whole batch.
  blocked_gemm(
      s.k, crs, s.n * P * Q, wr, second_operand_first(policy), sites_of(counters, policy, "conv2d", "y"),
      [&](int first, int width, float* out) {
        for (int ci = 0; ci < s.c; ++ci)
          for (int ri = 0; ri < s.r; ++ri)
            for (int si = 0; si < s.s; ++si, out += width) im2col_row(s, xr.data(), ci, ri, si, first, width, out);
      },
      [&](int first, int width, const float* c) {
        // row kk of C: columns (image, pq), a run per image
        for (int kk = 0; kk < s.k; ++kk)
          for (int j = first, end = first + width; j < end;) {
            const int img = j / (P * Q), pq = j % (P * Q), run = std::min(P * Q - pq, end - j);
            std::copy_n(c, run, y.data() + at(img, kk, 0, pq, s.k, 1, P * Q));
            c += run;
            j += run;
          }
      });
}

void conv2d_backward_data_emu(const ops::Conv2dShape& s, std::span<const float> dy, std::span<const float> wgt,
                              std::span<float> dx, const GemmPolicy& policy, CounterSet* counters) {
  formats::check_fp_environment("emu::conv2d_backward_data_emu");
  s.check(dx.size(), wgt.size(), dy.size(), "dx", "weight", "dy");
  const std::vector<float> dyr = quantized_copy(dy, policy.input, site_counters(counters, "conv2d_backward_data.dy"));
  const std::vector<float> wr =
      quantized_copy(wgt, policy.b_format(), site_counters(counters, "conv2d_backward_data.w"));
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
          s.c, terms, s.n * static_cast<int>(rows.size() * cols.size()), a, second_operand_first(policy), sites,
          [&](int first, int width, float* out) {
            // The phase's columns are stride apart, so along a run of them
            // the output column ow = (col + pad - st[j]) / stride steps by
            // one (exactly: col + pad - st[j] is a multiple of stride).
            const int per_row = static_cast<int>(cols.size()), per_image = static_cast<int>(rows.size()) * per_row;
            for (int kk = 0; kk < s.k; ++kk)
              for (int i = 0; i < nr; ++i)
                for (int j = 0; j < ns; ++j)
                  for (int col = first, end = first + width; col < end;) {
                    const int img = col / per_image, row = rows[col % per_image / per_row], m = col % per_row;
                    const int run = std::min(per_row - m, end - col);
                    const int oh_times_stride = row + s.pad - rt[i];  // a multiple of stride
                    const int oh = oh_times_stride / s.stride;
                    if (oh_times_stride < 0 || oh >= P) std::fill(out, out + run, 0.0f);
                    else gather_row(dyr.data() + at(img, kk, oh, 0, s.k, P, Q), Q, (cols[m] + s.pad - st[j]) / s.stride, 1,
                                    run, out);
                    out += run;
                    col += run;
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

void conv2d_backward_filter_emu(const ops::Conv2dShape& s, std::span<const float> x, std::span<const float> dy,
                                std::span<float> dw, const GemmPolicy& policy, CounterSet* counters) {
  formats::check_fp_environment("emu::conv2d_backward_filter_emu");
  s.check(x.size(), dw.size(), dy.size(), "x", "dw", "dy");
  const std::vector<float> xr = quantized_copy(x, policy.input, site_counters(counters, "conv2d_backward_filter.x"));
  const std::vector<float> dyr =
      quantized_copy(dy, policy.b_format(), site_counters(counters, "conv2d_backward_filter.dy"));
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
      s.k, npq, crs, a, second_operand_first(policy), sites_of(counters, policy, "conv2d_backward_filter", "dw"),
      [&](int first, int width, float* out) {
        struct Tap {
          int ci, ri, si;
          std::size_t offset;  // of x[ci, ri, si] from a window's top-left input element
        };
        std::vector<Tap> taps;
        for (int col = first; col < first + width; ++col) {
          const int ci = col / (s.r * s.s), ri = col / s.s % s.r, si = col % s.s;
          taps.push_back({ci, ri, si, (static_cast<std::size_t>(ci) * s.h + ri) * s.w + si});
        }
        for (const Window& win : wins) {
          // A window inside the input needs no bounds check per tap.
          if (win.ih0 >= 0 && win.ih0 + s.r <= s.h && win.iw0 >= 0 && win.iw0 + s.s <= s.w) {
            const float* corner = xr.data() + win.image + static_cast<std::size_t>(win.ih0) * s.w + win.iw0;
            for (const Tap& t : taps) *out++ = corner[t.offset];
          } else {
            for (const Tap& t : taps) *out++ = tap(s, xr.data(), win, t.ci, t.ri, t.si);
          }
        }
      },
      [&](int first, int width, const float* c) {
        for (int kk = 0; kk < s.k; ++kk)
          for (int col = first; col < first + width; ++col) dw[static_cast<std::size_t>(kk) * crs + col] = *c++;
      });
}

}  // namespace mpverify::emu
