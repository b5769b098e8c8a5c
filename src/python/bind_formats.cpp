// The formats, rounding an array to one, and block quantization.
#include <optional>
#include <stdexcept>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "emu/block_quantize.h"
#include "emu/quantize.h"
#include "formats/arithmetic.h"
#include "formats/encoding.h"
#include "formats/flags.h"
#include "formats/format.h"
#include "formats/philox.h"
#include "formats/rounding.h"
#include "tensor_input.h"

namespace py = pybind11;

namespace mpverify::python {

namespace {

py::dict format_info(const std::string& name) {
  const formats::Format f = formats::parse_format(name);
  py::dict d;
  d["name"] = f.name;
  d["exponent_bits"] = f.exponent_bits;
  d["mantissa_bits"] = f.mantissa_bits;
  d["precision"] = f.precision();
  d["bias"] = f.bias;
  d["width"] = f.width();
  d["signed"] = f.is_signed;
  d["subnormals"] = f.subnormals;
  d["has_zero"] = f.has_zero;
  d["has_infinity"] = f.has_infinity();
  d["has_nan"] = f.has_nan();
  d["encoding"] = std::string(formats::to_string(f.encoding));
  d["overflow"] = std::string(formats::to_string(f.overflow));
  d["emin"] = f.emin();
  d["emax"] = f.emax();
  d["max_finite"] = f.max_finite();
  d["min_normal"] = f.min_normal();
  d["min_subnormal"] = f.min_subnormal();
  d["epsilon"] = f.epsilon();
  d["unit_roundoff"] = f.unit_roundoff();
  d["lost_update_ratio_needed"] = f.lost_update_ratio_needed();
  d["lost_update_ratio_sufficient"] = f.lost_update_ratio_sufficient();
  return d;
}

py::list format_names() {
  py::list out;
  for (const formats::Format& f : formats::all_presets()) out.append(f.name);
  return out;
}

formats::Rounding rounding_mode(const std::string& name) {
  const std::optional<formats::Rounding> r = formats::parse_rounding(name);
  if (!r) throw std::invalid_argument("unknown rounding '" + name + "' (rne, rtz, up, down, rna, odd, stochastic)");
  return *r;
}

// float64 input is rounded once from the double, as `mpverify round` does (a float32 copy first would round twice).
py::tuple round_doubles(const py::array& x, const formats::Format& f, formats::Rounding mode, std::uint64_t seed,
                        std::uint64_t stream) {
  const auto c = contiguous<double>(x, "round: x");
  std::vector<float> out(static_cast<std::size_t>(c.size()));
  emu::Counters counters;
  formats::RoundingContext rc{mode};
  for (std::size_t i = 0; i < out.size(); ++i) {
    rc.random = formats::stochastic_draw(seed, stream, i);
    formats::Flags flags;
    const std::uint32_t r = formats::from_double(f, c.data()[i], rc, flags);
    emu::count_rounding(counters, f, c.data()[i], r, flags);
    out[i] = static_cast<float>(formats::to_double(f, r));
  }
  std::vector<std::size_t> shape;
  for (py::ssize_t d = 0; d < x.ndim(); ++d) shape.push_back(static_cast<std::size_t>(x.shape(d)));
  return py::make_tuple(float_array(out, shape), counters_dict(counters));
}

py::tuple round_array(const py::array& x, const std::string& bits, const std::string& format,
                      const std::string& rounding, std::uint64_t seed, std::uint64_t stream) {
  const formats::Format f = formats::parse_format(format);
  if (bits.empty() && x.dtype().kind() == 'f' && x.itemsize() == 8)
    return round_doubles(x, f, rounding_mode(rounding), seed, stream);
  const FloatInput in(x, bits, "round: x");
  emu::QuantizeSpec spec{f};
  spec.rounding = rounding_mode(rounding);
  spec.seed = seed;
  spec.stream = stream;
  std::vector<float> out(in.values().size());
  emu::Counters c;
  emu::quantize(in.values(), out, spec, &c);
  return py::make_tuple(float_array(out, in.shape()), counters_dict(c));
}

py::dict quantize_blocks(const py::array& x, const std::string& bits, const std::string& scheme_name, int axis,
                         const std::string& scale_rule, const std::string& tile, const std::string& rounding,
                         std::uint64_t seed, std::uint64_t stream) {
  const FloatInput in(x, bits, "quantize: x");
  const emu::BlockScheme scheme = block_scheme(scheme_name, tile);
  emu::BlockQuantizeOptions options;
  if (!scale_rule.empty()) {
    if (scheme.scale_format != emu::ScaleFormat::e8m0)
      throw std::invalid_argument("scale_rule applies to the MX schemes (E8M0 scales), not " + scheme_name);
    const std::optional<emu::ScaleRule> rule = emu::parse_scale_rule(scale_rule);
    if (!rule) throw std::invalid_argument("unknown scale_rule '" + scale_rule + "' (floor, ceil, even, rceil)");
    options.scale_rule = *rule;
  }
  options.rounding = rounding_mode(rounding);
  options.seed = seed;
  options.stream = stream;
  const emu::BlockQuantized q = emu::block_quantize(in.values(), in.shape(), axis, scheme, options);
  py::dict d;
  d["values"] = float_array(q.values, in.shape());
  std::vector<py::ssize_t> dims(in.shape().begin(), in.shape().end());
  py::array_t<std::uint8_t> codes(dims);
  std::copy(q.codes.begin(), q.codes.end(), codes.mutable_data());
  d["codes"] = codes;
  d["scales"] = float_array(q.scales, q.scale_shape);
  d["tensor_scale"] = q.tensor_scale ? py::object(py::float_(*q.tensor_scale)) : py::object(py::none());
  d["scheme"] = scheme.name;
  d["element"] = scheme.element.name;
  d["block"] = py::make_tuple(scheme.block_rows, scheme.block_cols);
  d["counters"] = block_counters_dict(q.counters);
  d["sqnr_db"] = emu::sqnr_db(in.values(), q.values);
  return d;
}

py::list scheme_names() {
  py::list out;
  for (const emu::BlockScheme& s : emu::block_schemes()) out.append(s.name);
  return out;
}

}  // namespace

py::dict counters_dict(const emu::Counters& c) {
  py::dict d;
  d["elements"] = c.elements;
  d["zeros_in"] = c.zeros_in;
  d["nonfinite_in"] = c.nonfinite_in;
  d["inexact"] = c.inexact;
  d["underflow"] = c.underflow;
  d["underflow_to_zero"] = c.underflow_to_zero;
  d["subnormal"] = c.subnormal;
  d["overflow"] = c.overflow;
  d["nan_created"] = c.nan_created;
  d["addends_nonzero"] = c.addends_nonzero;
  d["swamped"] = c.swamped;
  d["truncated"] = c.truncated;
  return d;
}

py::dict block_counters_dict(const emu::BlockCounters& c) {
  py::dict d;
  d["elements"] = c.elements;
  d["blocks"] = c.blocks;
  d["nonfinite_in"] = c.nonfinite_in;
  d["saturated"] = c.saturated;
  d["underflow_to_zero"] = c.underflow_to_zero;
  d["subnormal"] = c.subnormal;
  d["scales_clamped"] = c.scales_clamped;
  d["inexact"] = c.inexact;
  return d;
}

emu::BlockScheme block_scheme(const std::string& name, const std::string& tile) {
  const emu::BlockScheme* s = emu::find_block_scheme(name);
  if (!s) {
    std::string names;
    for (const emu::BlockScheme& b : emu::block_schemes()) names += (names.empty() ? "" : ", ") + b.name;
    throw std::invalid_argument("unknown block scheme '" + name + "' (schemes: " + names + ")");
  }
  emu::BlockScheme scheme = *s;
  if (tile.empty()) return scheme;
  if (tile != "16x16" || scheme.scale_format != emu::ScaleFormat::ue4m3_fp32)
    throw std::invalid_argument("tile '" + tile + "' is nvfp4's 16x16 weight tile, not for " + name);
  scheme.block_rows = scheme.block_cols = 16;
  return scheme;
}


void bind_formats(py::module_& m) {
  m.def("format_info", &format_info, py::arg("name"),
        "The format's parameters and constants as a dict (name, exponent_bits, mantissa_bits, precision, bias, "
        "max_finite, min_normal, min_subnormal, epsilon, unit_roundoff, ...). Accepts every name `mpverify "
        "formats` lists and eXmY[:modifiers].");
  m.def("format_names", &format_names, "The preset formats' names.");
  m.def("round", &round_array, exact_fp(), py::arg("x"), py::arg("bits"), py::arg("format"), py::arg("rounding"),
        py::arg("seed"), py::arg("stream"),
        "Rounds every element once to the format; returns (float32 array, counters dict).");
  m.def("block_schemes", &scheme_names, "The block schemes' names (mxfp8-e4m3, nvfp4, fp8-tile1x128, ...).");
  m.def("quantize", &quantize_blocks, exact_fp(), py::arg("x"), py::arg("bits"), py::arg("scheme"), py::arg("axis"),
        py::arg("scale_rule"), py::arg("tile"), py::arg("rounding"), py::arg("seed"), py::arg("stream"),
        "Block quantization along `axis`; returns a dict: values (dequantized), codes, scales, tensor_scale, "
        "counters, sqnr_db.");
}

}  // namespace mpverify::python
