// `mpverify analyze` and `mpverify swamp` on dumps written during training
// (DIR/step-NNNNNN/{weights,grads,updates,activation_grads}.safetensors and
// step.json), as a user runs them: --only/--exclude globs, inputs that match
// nothing (exit 2, nothing written), the per-layer summary over steps,
// --at-step-scale, and swamp over a dump's steps in several formats. Every
// count is held against a recount written here from the formats' definitions
// (fp16 rounds x*S to zero when |x*S| <= 2^-25, the tie below its smallest
// subnormal, and overflows when |x*S| >= 65520, the tie above 65504), or
// against lost updates worked out by hand, never against the program's own
// output.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/tensor_selection.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "support/run_command.h"

namespace {

using mpverify::test::run_command;
using namespace mpverify;
namespace fs = std::filesystem;

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " " + args; }

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpverify_dump_cli_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string step_dir(int step) {
  char b[32];
  std::snprintf(b, sizeof b, "step-%06d", step);
  return b;
}

// fp16 at scale S, from its definition: the float product, then one rounding to nearest even.
struct Recount {
  std::uint64_t nonzero = 0, to_zero = 0, overflow = 0;
  double to_zero_rate() const { return nonzero == 0 ? 0.0 : static_cast<double>(to_zero) / static_cast<double>(nonzero); }
  double overflow_rate() const { return nonzero == 0 ? 0.0 : static_cast<double>(overflow) / static_cast<double>(nonzero); }
  Recount& operator+=(const Recount& o) {
    nonzero += o.nonzero;
    to_zero += o.to_zero;
    overflow += o.overflow;
    return *this;
  }
};

Recount fp16_recount(const std::vector<float>& x, float scale) {
  Recount r;
  for (const float v : x) {
    if (v == 0 || !std::isfinite(v)) continue;
    ++r.nonzero;
    const float p = std::fabs(v * scale);
    r.to_zero += p <= 0x1p-25f;
    r.overflow += p >= 65520.0f;
  }
  return r;
}

// Values spread over binades 2^(lo) .. 2^(hi), both signs, plus the fp16 ties at scale 1.
std::vector<float> spread(std::size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> e(lo, hi);
  std::uniform_real_distribution<float> m(1.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = ((rng() & 1) ? -1.0f : 1.0f) * std::ldexp(m(rng), e(rng));
  v[0] = 0.0f;
  v[1] = 0x1p-25f;
  v[2] = 65520.0f;
  return v;
}

const std::vector<std::pair<std::string, std::vector<std::size_t>>> kParams = {
    {"fc1.weight", {4, 8}}, {"fc1.bias", {4}}, {"fc2.weight", {2, 4}}};

// One step of a dump: weights, grads (binades drifting down with the step, so that underflow grows),
// updates, optionally activation_grads and step.json.
struct DumpWriter {
  fs::path root;
  std::map<std::string, std::vector<float>> values;  // "step-000010/grads.safetensors:fc1.weight" -> values

  void step(int step, const std::optional<std::string>& step_json, bool activation_grads = true) {
    const fs::path dir = root / step_dir(step);
    fs::create_directories(dir);
    std::map<std::string, std::vector<io::FloatTensor>> files;
    unsigned seed = 1000u * static_cast<unsigned>(step);
    for (const auto& [name, shape] : kParams) {
      std::size_t n = 1;
      for (const std::size_t d : shape) n *= d;
      files["weights"].push_back({name, shape, spread(n, -6, 1, ++seed)});
      files["grads"].push_back({name, shape, spread(n, -34 - step / 5, -6 - step / 5, ++seed)});
      files["updates"].push_back({name, shape, spread(n, -20, -10, ++seed)});
    }
    if (activation_grads)
      for (const char* module : {"fc1", "fc2"}) files["activation_grads"].push_back({module, {2, 4}, spread(8, -30, -5, ++seed)});
    for (const auto& [kind, tensors] : files) {
      io::write_safetensors(dir / (kind + ".safetensors"), tensors);
      for (const io::FloatTensor& t : tensors) values[step_dir(step) + "/" + kind + ".safetensors:" + t.name] = t.values;
    }
    if (step_json) std::ofstream(dir / "step.json") << *step_json;
  }
};

std::string step_json(int step, double scale) {
  return "{\"step\": " + std::to_string(step) + ", \"scale\": " + std::to_string(scale) +
         ", \"found_inf\": false, \"skipped\": false, \"loss\": 2.3}";
}

const nlohmann::json* find_result(const nlohmann::json& j, const std::string& tensor, double scale) {
  for (const nlohmann::json& r : j["results"])
    if (r["tensor"] == tensor && r["scale"].get<double>() == scale) return &r;
  return nullptr;
}

std::set<std::string> tensor_names(const nlohmann::json& j) {
  std::set<std::string> names;
  for (const nlohmann::json& t : j["tensors"]) names.insert(t["tensor"].get<std::string>());
  return names;
}

TEST(TensorGlob, ShellStyleWithStarAcrossSlashes) {
  using analysis::glob_matches;
  EXPECT_TRUE(glob_matches("*/grads.safetensors:*", "step-000010/grads.safetensors:fc1.weight"));
  EXPECT_FALSE(glob_matches("*/grads.safetensors:*", "step-000010/activation_grads.safetensors:fc1"));
  EXPECT_TRUE(glob_matches("*fc1*", "runs/a/step-000010/weights.safetensors:fc1.bias"));  // '*' spans '/'
  EXPECT_TRUE(glob_matches("fc?.weight", "fc2.weight"));
  EXPECT_FALSE(glob_matches("fc?.weight", "fc10.weight"));
  EXPECT_TRUE(glob_matches("step-0000[12]0/*", "step-000020/x.npy:x"));
  EXPECT_FALSE(glob_matches("step-0000[12]0/*", "step-000030/x.npy:x"));
  EXPECT_TRUE(glob_matches("*[!s]", "fc1.weight"));
  EXPECT_FALSE(glob_matches("*[!s]", "fc1.bias"));
  EXPECT_FALSE(glob_matches("grads", "step-000010/grads.safetensors:g"));  // the whole name
}

TEST(DumpCli, OnlyAndExcludeKeepTheMatchingTensorsAndCountThemExactly) {
  TempDir d;
  DumpWriter w{d.path, {}};
  for (const int s : {0, 10, 20}) w.step(s, step_json(s, 65536));
  const auto r = run_command(
      cli("analyze " + d.path.string() + " --format fp16 --scales 1,1024 --only '*/grads.safetensors:*' --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::set<std::string> expected;
  Recount total1, total1024;
  for (const auto& [name, v] : w.values) {
    if (name.find("/grads.safetensors:") == std::string::npos) continue;
    expected.insert(name);
    const Recount c1 = fp16_recount(v, 1), c1024 = fp16_recount(v, 1024);
    total1 += c1;
    total1024 += c1024;
    const nlohmann::json* s1 = find_result(j, name, 1);
    const nlohmann::json* s1024 = find_result(j, name, 1024);
    ASSERT_TRUE(s1 && s1024) << name;
    EXPECT_EQ((*s1)["underflow_to_zero"], c1.to_zero) << name;
    EXPECT_EQ((*s1)["overflow"], c1.overflow) << name;
    EXPECT_EQ((*s1024)["underflow_to_zero"], c1024.to_zero) << name;
    EXPECT_EQ((*s1024)["overflow"], c1024.overflow) << name;
  }
  EXPECT_EQ(tensor_names(j), expected);
  EXPECT_EQ(expected.size(), 9u);
  EXPECT_EQ(j["total"][0]["underflow_to_zero"], total1.to_zero);
  EXPECT_EQ(j["total"][1]["underflow_to_zero"], total1024.to_zero);
  EXPECT_EQ(j["total"][0]["overflow"], total1.overflow);
  EXPECT_EQ(j["selection"]["tensors_kept"], 9);
  EXPECT_EQ(j["selection"]["tensors_seen"], 33);  // 3 steps x (3 weights + 3 grads + 3 updates + 2 activation grads)

  // Several globs (any matches), '?' and '[...]', and --exclude.
  const auto k = run_command(cli("analyze " + d.path.string() + " --format fp16 --only 'step-0000[01]0/grads*:fc?.weight'" +
                                 " --only '*/activation_grads.safetensors:*' --exclude '*fc2*' --json"), "");
  ASSERT_EQ(k.exit_code, 0) << k.out;
  EXPECT_EQ(tensor_names(nlohmann::json::parse(k.out)),
            (std::set<std::string>{"step-000000/grads.safetensors:fc1.weight", "step-000010/grads.safetensors:fc1.weight",
                                   "step-000000/activation_grads.safetensors:fc1",
                                   "step-000010/activation_grads.safetensors:fc1",
                                   "step-000020/activation_grads.safetensors:fc1"}));
}

TEST(DumpCli, AnInputThatMatchesNothingExitsTwoAndWritesNothing) {
  TempDir d;
  DumpWriter w{d.path / "dump", {}};
  w.step(0, step_json(0, 1024));
  fs::create_directories(d.path / "empty");
  std::ofstream(d.path / "empty" / "notes.txt") << "no tensors here\n";
  // A safetensors file whose only tensor is I32: nothing to analyse.
  const std::string header = R"({"ids":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  std::string ints;
  for (int b = 0; b < 8; ++b) ints += static_cast<char>((header.size() >> (8 * b)) & 0xff);
  ints += header + std::string(8, '\0');
  fs::create_directories(d.path / "ints");
  std::ofstream(d.path / "ints" / "i.safetensors", std::ios::binary) << ints;

  const fs::path json = d.path / "o.json", csv = d.path / "o.csv", svg = d.path / "o.svg";
  const std::string outputs = " --json-out " + json.string() + " --csv-out " + csv.string() + " --plot " + svg.string();
  const std::string dump = (d.path / "dump").string();
  const struct {
    std::string args;
    std::vector<std::string> said;
  } cases[] = {
      {"analyze " + (d.path / "empty").string() + " --format fp16",
       {(d.path / "empty").string(), "no .npy, .npz or .safetensors files"}},
      {"analyze " + dump + " --format fp16 --only '*/grads.safetensors:fc9*'",
       {"--only '*/grads.safetensors:fc9*'", "kept none of its 11 tensor(s)", "step-000000/", ".safetensors:fc1"}},
      {"analyze " + dump + " --format fp16 --only 'grads.safetensors:*'", {"--only 'grads.safetensors:*'"}},
      {"analyze " + dump + " --format fp16 --exclude '*'", {"--exclude '*' kept none"}},
      {"analyze " + (d.path / "ints").string() + " --format fp16", {"no floating-point tensor", "ids (I32)"}},
      {"analyze " + (d.path / "ints").string() + " --format fp16 --per-layer", {"--per-layer", "no step-NNNNNN"}},
  };
  for (const auto& c : cases) {
    const auto r = run_command(cli(c.args + outputs), "", true);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("mpverify analyze: error: ", 0), 0u) << r.out;
    for (const std::string& s : c.said) EXPECT_NE(r.out.find(s), std::string::npos) << c.args << "\nwants: " << s << "\n" << r.out;
    for (const fs::path& f : {json, csv, svg}) {
      EXPECT_FALSE(fs::exists(f)) << c.args << ": " << f;
      EXPECT_FALSE(fs::exists(f.string() + ".tmp")) << c.args << ": " << f;
    }
  }
  // One glob that matched nothing beside one that did: analysed, with a warning.
  const auto r = run_command(cli("analyze " + dump + " --format fp16 --only '*:fc1.bias' --only '*:nothing' --json"), "", true);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: --only '*:nothing' matched no tensor"), std::string::npos) << r.out;
}

TEST(DumpCli, AStepJsonThatCannotBeUsedExitsTwoNamingIt) {
  TempDir d;
  const struct {
    std::string dir, json, said;
  } cases[] = {
      {"renamed", step_json(21, 1024), "\"step\" is 21 but the directory is step 20 (rename the directory"},
      {"not_json", "{\"step\": 20, \"scale\": ", "is not JSON ([json.exception.parse_error"},
      {"deep", "{\"step\": " + std::string(100, '[') + std::string(100, ']') + "}", "is not JSON (JSON nested deeper than 64"},
      {"array", "[20]", "is not a JSON object"},
      {"scale_text", "{\"step\": 20, \"scale\": \"65536\"}", "\"scale\" is \"65536\", not a number"},
      {"flag_text", "{\"found_inf\": 0}", "\"found_inf\" is 0, not true or false"},
  };
  const fs::path out = d.path / "o.json";
  for (const auto& c : cases) {
    DumpWriter w{d.path / c.dir, {}};
    w.step(20, c.json);
    const fs::path file = d.path / c.dir / "step-000020" / "step.json";
    for (const std::string& command : {"analyze " + (d.path / c.dir).string() + " --format fp16",
                                       "swamp " + (d.path / c.dir).string()}) {
      const auto r = run_command(cli(command + " --json-out " + out.string()), "", true);
      EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.out;
      EXPECT_NE(r.out.find(file.string() + ": " + c.said), std::string::npos) << command << "\n" << r.out;
      EXPECT_FALSE(fs::exists(out)) << command;
    }
  }
  // Two directories of one step.
  DumpWriter twice{d.path / "twice", {}};
  twice.step(10, std::nullopt);
  fs::rename(d.path / "twice" / "step-000010", d.path / "twice" / "step-10");
  twice.step(10, std::nullopt);
  const auto r = run_command(cli("analyze " + (d.path / "twice").string() + " --format fp16"), "", true);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("are both step 10"), std::string::npos) << r.out;
}

// The summary of one layer at one scale, recounted from the values of its steps.
struct ExpectedLayer {
  std::size_t steps = 0;
  double first = 0, last = 0, worst = 0, worst_overflow = 0, slope = 0;
  int worst_step = 0, worst_overflow_step = 0;
};

ExpectedLayer expected_layer(const DumpWriter& w, const std::vector<int>& steps, const std::string& within,
                             const std::map<int, float>& scale_of) {
  ExpectedLayer e;
  std::vector<double> x, y;
  for (const int s : steps) {
    const Recount c = fp16_recount(w.values.at(step_dir(s) + "/" + within), scale_of.at(s));
    if (e.steps == 0 || c.to_zero_rate() > e.worst) {
      e.worst = c.to_zero_rate();
      e.worst_step = s;
    }
    if (e.steps == 0 || c.overflow_rate() > e.worst_overflow) {
      e.worst_overflow = c.overflow_rate();
      e.worst_overflow_step = s;
    }
    if (e.steps == 0) e.first = c.to_zero_rate();
    e.last = c.to_zero_rate();
    ++e.steps;
    x.push_back(static_cast<double>(s));
    y.push_back(c.to_zero_rate());
  }
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0, sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    mx += x[i] / n;
    my += y[i] / n;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  e.slope = sxy / sxx;
  return e;
}

const nlohmann::json* find_layer(const nlohmann::json& j, const std::string& layer) {
  for (const nlohmann::json& l : j["layers"])
    if (l["layer"] == layer) return &l;
  return nullptr;
}

void expect_layer(const nlohmann::json& s, const ExpectedLayer& e, const std::string& what) {
  EXPECT_EQ(s["steps"], e.steps) << what;
  EXPECT_EQ(s["first_underflow_to_zero_rate"].get<double>(), e.first) << what;
  EXPECT_EQ(s["last_underflow_to_zero_rate"].get<double>(), e.last) << what;
  EXPECT_EQ(s["worst_underflow_to_zero_rate"].get<double>(), e.worst) << what;
  EXPECT_EQ(s["worst_underflow_step"], e.worst_step) << what;
  EXPECT_EQ(s["worst_overflow_rate"].get<double>(), e.worst_overflow) << what;
  EXPECT_EQ(s["worst_overflow_step"], e.worst_overflow_step) << what;
  EXPECT_NEAR(s["underflow_to_zero_rate_slope_per_step"].get<double>(), e.slope, 1e-12 + 1e-9 * std::fabs(e.slope)) << what;
}

TEST(DumpCli, PerLayerSummaryOverStepsEqualsARecount) {
  TempDir d;
  DumpWriter w{d.path, {}};
  const std::vector<int> steps = {0, 10, 20, 40};
  // An older dump: step directories without step.json or activation gradients.
  for (const int s : steps) w.step(s, std::nullopt, false);
  const auto r = run_command(cli("analyze " + d.path.string() + " --format fp16 --scales 1,64 --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["steps"][3]["step"], 40);
  EXPECT_EQ(j["steps"][3]["step_json"], false);
  ASSERT_EQ(j["layers"].size(), 9u);  // weights, grads, updates x 3 tensors
  for (const std::string kind : {"weights", "grads", "updates"})
    for (const auto& [name, shape] : kParams) {
      const std::string within = kind + ".safetensors:" + name;
      const nlohmann::json* l = find_layer(j, within);
      ASSERT_TRUE(l) << within;
      EXPECT_EQ((*l)["kind"], kind);
      EXPECT_EQ((*l)["tensor"], name);
      ASSERT_EQ((*l)["per_scale"].size(), 2u);
      for (const int k : {0, 1}) {
        const float scale = k == 0 ? 1.0f : 64.0f;
        const nlohmann::json& s = (*l)["per_scale"][k];
        EXPECT_EQ(s["scale"].get<double>(), scale);
        EXPECT_EQ(s["first_step"], 0);
        EXPECT_EQ(s["last_step"], 40);
        expect_layer(s, expected_layer(w, steps, within, {{0, scale}, {10, scale}, {20, scale}, {40, scale}}),
                     within + " at " + std::to_string(scale));
      }
    }
  // The grads drift down a binade every 5 steps: their underflow grows.
  EXPECT_GT((*find_layer(j, "grads.safetensors:fc1.weight"))["per_scale"][0]["underflow_to_zero_rate_slope_per_step"], 0.0);

  // The table: per-tensor rows, then the per-layer rows; --per-layer keeps only the latter and the totals.
  const auto t = run_command(cli("analyze " + d.path.string() + " --format fp16 --scales 1,64"), "");
  ASSERT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("step-000020/grads.safetensors:fc1.weight "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("\ngrads.safetensors:fc1.weight "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("4 step(s), 9 layer(s)"), std::string::npos) << t.out;
  const auto p = run_command(cli("analyze " + d.path.string() + " --format fp16 --scales 1,64 --per-layer"), "");
  ASSERT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.out.find("step-000020/grads.safetensors:fc1.weight "), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("\ngrads.safetensors:fc1.weight "), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("\n(total) "), std::string::npos) << p.out;
}

TEST(DumpCli, AtStepScaleAnalysesEachStepAtItsRecordedScale) {
  TempDir d;
  DumpWriter w{d.path, {}};
  const std::map<int, float> scale_of = {{0, 65536.0f}, {10, 1024.0f}, {20, 2048.0f}};
  for (const auto& [s, scale] : scale_of) w.step(s, step_json(s, scale));
  io::write_safetensors(d.path / "extra.safetensors", {{"x", {1}, {1.0f}}});  // in no step: left out
  const auto r = run_command(cli("analyze " + d.path.string() + " --format fp16 --at-step-scale --only '*grads.safetensors:*' --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["at_step_scale"], true);
  EXPECT_EQ(j["scales"], nlohmann::json({1024.0, 2048.0, 65536.0}));
  ASSERT_EQ(j["total"].size(), 1u);
  EXPECT_TRUE(j["total"][0]["scale"].is_null());  // three scales in one total
  Recount total;
  std::size_t checked = 0;
  for (const auto& [name, v] : w.values) {
    if (name.find("grads.safetensors:") == std::string::npos) continue;
    const float scale = scale_of.at(std::stoi(name.substr(5, 6)));
    const Recount c = fp16_recount(v, scale);
    total += c;
    const nlohmann::json* s = find_result(j, name, scale);
    ASSERT_TRUE(s) << name << " at " << scale;
    EXPECT_EQ((*s)["underflow_to_zero"], c.to_zero) << name;
    EXPECT_EQ((*s)["overflow"], c.overflow) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 15u);  // grads and activation grads of 3 steps
  EXPECT_EQ(j["results"].size(), 15u);
  EXPECT_EQ(j["total"][0]["underflow_to_zero"], total.to_zero);
  EXPECT_EQ(j["total"][0]["overflow"], total.overflow);
  EXPECT_NE(std::find(j["skipped"].begin(), j["skipped"].end(),
                      "extra.safetensors: not in a step directory, so it has no recorded scale (--at-step-scale)"),
            j["skipped"].end()) << j["skipped"];
  const nlohmann::json* l = find_layer(j, "grads.safetensors:fc2.weight");
  ASSERT_TRUE(l);
  ASSERT_EQ((*l)["per_scale"].size(), 1u);
  EXPECT_TRUE((*l)["per_scale"][0]["scale"].is_null());
  expect_layer((*l)["per_scale"][0], expected_layer(w, {0, 10, 20}, "grads.safetensors:fc2.weight", scale_of),
               "grads.safetensors:fc2.weight");

  // Usage errors: with --scales, and on a step that records no scale.
  const fs::path old_dump = d.path / "old";
  DumpWriter old{old_dump, {}};
  old.step(0, step_json(0, 8));
  old.step(10, std::nullopt);
  const fs::path out = d.path / "o.json";
  for (const std::string& args : {"analyze " + d.path.string() + " --format fp16 --at-step-scale --scales 1,2",
                                  "analyze " + old_dump.string() + " --format fp16 --at-step-scale"}) {
    const auto u = run_command(cli(args + " --json-out " + out.string()), "", true);
    EXPECT_EQ(u.exit_code, 2) << args;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
  const auto u = run_command(cli("analyze " + old_dump.string() + " --format fp16 --at-step-scale"), "", true);
  EXPECT_NE(u.out.find((old_dump / "step-000010" / "step.json").string() + " does not exist"), std::string::npos) << u.out;
}

// Lost updates by construction, for w = 1 (fp16 p = 11, bf16 p = 8, fp8-e4m3 p = 4; the sum rounded once):
//   u = 2^-12: below half of fp16's ulp 2^-10 at 1: lost in fp16, bf16 and e4m3; kept with an fp32 master.
//   u = 2^-9:  kept in fp16 (1 + 2^-9 is an fp16 value); below half of bf16's ulp 2^-7: lost in bf16 and e4m3.
//   u = 2^-2:  1.25 is a value of all three: kept.
//   u = 0:     not an update.
struct Mix {
  int lost_all = 0, lost_bf16 = 0, kept = 0, zero = 0;
};

io::FloatTensor mixed(const std::string& name, const Mix& m, bool updates) {
  std::vector<float> v;
  const auto add = [&](int n, float u) { v.insert(v.end(), static_cast<std::size_t>(n), updates ? u : 1.0f); };
  add(m.lost_all, 0x1p-12f);
  add(m.lost_bf16, 0x1p-9f);
  add(m.kept, 0x1p-2f);
  add(m.zero, 0.0f);
  return {name, {v.size()}, v};
}

void expect_counts(const nlohmann::json& report, const Mix& m, const std::string& what) {
  const int updates = m.lost_all + m.lost_bf16 + m.kept;
  EXPECT_EQ(report["elements"], updates + m.zero) << what;
  EXPECT_EQ(report["fp16"]["without_master"]["updates"], updates) << what;
  EXPECT_EQ(report["fp16"]["without_master"]["lost"], m.lost_all) << what;
  EXPECT_EQ(report["bf16"]["without_master"]["lost"], m.lost_all + m.lost_bf16) << what;
  EXPECT_EQ(report["fp8-e4m3"]["without_master"]["lost"], m.lost_all + m.lost_bf16) << what;
  EXPECT_EQ(report["fp16"]["with_master"]["lost"], 0) << what;
  EXPECT_EQ(report["fp8-e4m3"]["without_master"]["precision"], 4) << what;
}

Mix operator+(Mix a, const Mix& b) {
  return {a.lost_all + b.lost_all, a.lost_bf16 + b.lost_bf16, a.kept + b.kept, a.zero + b.zero};
}

TEST(SwampDumpCli, EveryStepPairsItsWeightsWithItsUpdates) {
  TempDir d;
  const std::map<int, std::map<std::string, Mix>> plan = {
      {0, {{"fc1.weight", {3, 1, 4, 1}}, {"fc2.weight", {0, 2, 2, 0}}}},
      {10, {{"fc1.weight", {1, 5, 0, 2}}, {"fc2.weight", {6, 0, 1, 0}}}},
  };
  for (const auto& [step, tensors] : plan) {
    const fs::path dir = d.path / step_dir(step);
    fs::create_directories(dir);
    std::vector<io::FloatTensor> wt, ut;
    for (const auto& [name, m] : tensors) {
      wt.push_back(mixed(name, m, false));
      ut.push_back(mixed(name, m, true));
    }
    io::write_safetensors(dir / "weights.safetensors", wt);
    io::write_safetensors(dir / "updates.safetensors", ut);
    io::write_safetensors(dir / "grads.safetensors", ut);  // not paired
    std::ofstream(dir / "step.json") << step_json(step, 1024);
  }
  // Step 20 as .npy directories: weights/fc1.weight.npy with updates/fc1.weight.npy.
  const Mix npy = {2, 2, 2, 2};
  fs::create_directories(d.path / "step-000020" / "weights");
  fs::create_directories(d.path / "step-000020" / "updates");
  const io::FloatTensor wn = mixed("fc1.weight", npy, false), un = mixed("fc1.weight", npy, true);
  io::write_npy(d.path / "step-000020" / "weights" / "fc1.weight.npy", wn.values, wn.shape);
  io::write_npy(d.path / "step-000020" / "updates" / "fc1.weight.npy", un.values, un.shape);
  // Step 30 has weights but no updates.
  fs::create_directories(d.path / "step-000030");
  io::write_safetensors(d.path / "step-000030" / "weights.safetensors", {mixed("fc1.weight", npy, false)});

  const auto r = run_command(cli("swamp " + d.path.string() + " --format fp16,bf16 --format fp8-e4m3 --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["formats"], nlohmann::json({"fp16", "bf16", "fp8-e4m3"}));
  ASSERT_EQ(j["steps"].size(), 3u);
  Mix all, fc1;
  for (std::size_t i = 0; i < 2; ++i) {
    const nlohmann::json& s = j["steps"][i];
    const int step = i == 0 ? 0 : 10;
    EXPECT_EQ(s["step"], step);
    EXPECT_EQ(s["weights"], step_dir(step) + "/weights.safetensors");
    EXPECT_EQ(s["updates"], step_dir(step) + "/updates.safetensors");
    ASSERT_EQ(s["tensors"].size(), 2u);
    Mix step_total;
    for (const nlohmann::json& t : s["tensors"]) {
      const Mix& m = plan.at(step).at(t["tensor"].get<std::string>());
      expect_counts(t, m, step_dir(step) + " " + t["tensor"].get<std::string>());
      step_total = step_total + m;
    }
    expect_counts(s["total"], step_total, step_dir(step) + " total");
    all = all + step_total;
    fc1 = fc1 + plan.at(step).at("fc1.weight");
  }
  const nlohmann::json& s20 = j["steps"][2];
  EXPECT_EQ(s20["weights"], "step-000020/weights");
  ASSERT_EQ(s20["tensors"].size(), 1u);
  EXPECT_EQ(s20["tensors"][0]["tensor"], "fc1.weight.npy:fc1.weight");
  expect_counts(s20["tensors"][0], npy, "step-000020");
  all = all + npy;
  expect_counts(j["total"], all, "total");
  // Per tensor over the steps: fc1.weight of the .safetensors steps (the .npy step names it by its file).
  ASSERT_EQ(j["tensors"].size(), 3u);
  EXPECT_EQ(j["tensors"][0]["tensor"], "fc1.weight");
  expect_counts(j["tensors"][0], fc1, "fc1.weight over steps");
  EXPECT_EQ(j["unpaired"], nlohmann::json({"step-000030: weights.safetensors but no updates.safetensors beside it"}));

  // The default formats, the CSV with its step column.
  const auto c = run_command(cli("swamp --dump " + d.path.string() + " --csv"), "");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(c.out.substr(0, c.out.find('\n')),
            "step,tensor,elements,updates,fp16_lost,fp16_lost_master,fp16_ratio_needed,fp16_ratio_sufficient,"
            "bf16_lost,bf16_lost_master,bf16_ratio_needed,bf16_ratio_sufficient");
  // Step 0's fc1.weight: 9 elements, 8 updates, 3 lost in fp16, 4 in bf16.
  EXPECT_NE(c.out.find("\n0,fc1.weight,9,8,3,0,"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\n,(total),"), std::string::npos) << c.out;
}

TEST(SwampDumpCli, UsageErrorsExitTwoAndWriteNothing) {
  TempDir d;
  io::write_safetensors(d.path / "w.safetensors", {{"p", {2}, {1.0f, 2.0f}}});
  io::write_safetensors(d.path / "u.safetensors", {{"p", {2}, {0x1p-12f, 0.5f}}});
  fs::create_directories(d.path / "nosteps");
  fs::create_directories(d.path / "unpaired" / "step-000000");
  io::write_safetensors(d.path / "unpaired" / "step-000000" / "grads.safetensors", {{"p", {1}, {1.0f}}});
  const std::string w = (d.path / "w.safetensors").string(), u = (d.path / "u.safetensors").string();
  const fs::path out = d.path / "o.json";
  const struct {
    std::string args, said;
  } cases[] = {
      {"swamp --weights " + w + " --updates " + w, "are the same file"},
      {"swamp --weights " + w + " --updates " + (d.path / "." / "w.safetensors").string(), "are the same file"},
      {"swamp --weights " + w + " --grads " + w + " --lr 0.1", "are the same file"},
      {"swamp " + (d.path / "nosteps").string(), "no step-NNNNNN directories"},
      {"swamp " + (d.path / "unpaired").string(), "step-000000: no weights.safetensors"},
      {"swamp " + (d.path / "unpaired").string() + " --weights " + w, "--weights goes with two files"},
      {"swamp " + w, "not a directory"},
      {"swamp --weights " + w + " --updates " + u + " --format fp17", "fp17"},
      {"swamp", "give a dump directory"},
  };
  for (const auto& c : cases) {
    const auto r = run_command(cli(c.args + " --json-out " + out.string()), "", true);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.said), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
  // Any format name: e5m7 (p = 8, as bf16) beside fp16.
  const auto r = run_command(cli("swamp --weights " + w + " --updates " + u + " --format e5m7,fp16 --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tensors"][0]["e5m7"]["without_master"]["precision"], 8);
  EXPECT_EQ(j["tensors"][0]["e5m7"]["without_master"]["lost"], 1);  // 1 + 2^-12; 2 + 0.5 is kept
  EXPECT_EQ(j["tensors"][0]["fp16"]["without_master"]["lost"], 1);
  EXPECT_FALSE(j["tensors"][0].contains("bf16"));
}

// Training multiplies only the gradients by the loss scale. So --at-step-scale measures weights and updates as
// stored (scale 1), and the recommended scale is drawn from the gradients alone unless --recommend-from all;
// either way a note says so. Expected values by hand: fp16 overflows from 65520; the largest |gradient| 2^-3
// stays finite up to 2^-3 x 2^18 = 32768 (2^19 gives 65536), the weight 100 up to 100 x 2^9 = 51200
// (2^10 gives 102400): 2^18 from the gradients, 2^9 from every tensor. At the step's scale 1024 the weight
// 100 would overflow, as stored it does not.
TEST(DumpCli, LossScalesApplyToGradientsAlone) {
  TempDir d;
  const fs::path step = d.path / step_dir(0);
  fs::create_directories(step);
  io::write_safetensors(step / "weights.safetensors", {{"w", {2}, {100.0f, -1.5f}}});
  io::write_safetensors(step / "grads.safetensors", {{"w", {2}, {0x1p-20f, 0x1p-3f}}});
  io::write_safetensors(step / "updates.safetensors", {{"w", {2}, {0x1p-10f, 0.0f}}});
  std::ofstream(step / "step.json") << step_json(0, 1024);
  const std::string dir = d.path.string();

  const auto plain = run_command(cli("analyze " + dir + " --format fp16 --scales 1,2^16 --json"), "");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  const nlohmann::json p = nlohmann::json::parse(plain.out);
  EXPECT_EQ(p["recommendation"]["from"], "gradients");
  EXPECT_EQ(p["recommendation"]["tensors"], 1);
  EXPECT_EQ(p["recommendation"]["largest_safe_scale_log2"], 18);
  ASSERT_EQ(p["notes"].size(), 2u);
  EXPECT_NE(p["notes"][0].get<std::string>().find("multiply weights and updates too"), std::string::npos);
  const auto all = run_command(cli("analyze " + dir + " --format fp16 --scales 1,2^16 --recommend-from all --json"), "");
  ASSERT_EQ(all.exit_code, 0) << all.out;
  const nlohmann::json a = nlohmann::json::parse(all.out);
  EXPECT_EQ(a["recommendation"]["from"], "all");
  EXPECT_EQ(a["recommendation"]["tensors"], 3);
  EXPECT_EQ(a["recommendation"]["largest_safe_scale_log2"], 9);
  const auto text = run_command(cli("analyze " + dir + " --format fp16 --scales 1,2^16"), "");
  EXPECT_NE(text.out.find("note: the recommendation is drawn from the 1 gradient tensors alone"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("2^18"), std::string::npos) << text.out;

  const auto stepped = run_command(cli("analyze " + dir + " --format fp16 --at-step-scale --json"), "");
  ASSERT_EQ(stepped.exit_code, 0) << stepped.out;
  const nlohmann::json s = nlohmann::json::parse(stepped.out);
  const nlohmann::json* weights = find_result(s, step_dir(0) + "/weights.safetensors:w", 1.0);
  const nlohmann::json* grads = find_result(s, step_dir(0) + "/grads.safetensors:w", 1024.0);
  const nlohmann::json* updates = find_result(s, step_dir(0) + "/updates.safetensors:w", 1.0);
  ASSERT_TRUE(weights && grads && updates) << s["results"].dump();
  EXPECT_EQ((*weights)["overflow"], 0);
  EXPECT_EQ(s["total"][0]["overflow"], 0);
  EXPECT_EQ((*grads)["underflow_to_zero"], 0);  // 2^-20 x 1024 = 2^-10 is an fp16 normal
  EXPECT_NE(s["notes"][0].get<std::string>().find("measured as stored, at scale 1"), std::string::npos);
  EXPECT_EQ(s["recommendation"]["from"], "gradients");
}

// A step whose updates cannot be read: exit 2 naming it, nothing written (1 is kept for verdicts);
// --skip-unreadable counts the other steps and lists the failure.
TEST(SwampDumpCli, AnUnreadableFileExitsTwoOrIsSkippedWhenAsked) {
  TempDir d;
  for (int step : {0, 1}) {
    const fs::path dir = d.path / step_dir(step);
    fs::create_directories(dir);
    io::write_safetensors(dir / "weights.safetensors", {{"p", {2}, {1.0f, 2.0f}}});
    io::write_safetensors(dir / "updates.safetensors", {{"p", {2}, {0x1p-12f, 0.5f}}});
    std::ofstream(dir / "step.json") << step_json(step, 1);
  }
  // Step 1's updates: a header length past the end of the file.
  std::ofstream(d.path / step_dir(1) / "updates.safetensors", std::ios::binary | std::ios::trunc)
      << std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10);
  const fs::path out = d.path / "o.json";
  const auto refused = run_command(cli("swamp " + d.path.string() + " --json-out " + out.string()), "", true);
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_NE(refused.out.find(step_dir(1) + "/updates.safetensors"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--skip-unreadable"), std::string::npos) << refused.out;
  EXPECT_FALSE(fs::exists(out));
  const auto r = run_command(cli("swamp " + d.path.string() + " --format fp16 --skip-unreadable --json"), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["file"], step_dir(1) + "/updates.safetensors");
  // Step 0 alone is counted: 1 + 2^-12 is lost in fp16 (below half an ulp of 1, 2^-11), 2 + 0.5 is kept.
  EXPECT_EQ(j["total"]["fp16"]["without_master"]["updates"], 2);
  EXPECT_EQ(j["total"]["fp16"]["without_master"]["lost"], 1);
}

TEST(DumpCli, HelpNamesTheDumpOptions) {
  const auto a = run_command(cli("analyze --help"), "");
  ASSERT_EQ(a.exit_code, 0);
  for (const char* term : {"--only GLOB", "--exclude GLOB", "--per-layer", "--at-step-scale", "step.json",
                           "least-squares slope", "no tensor to analyse (nothing written)"})
    EXPECT_NE(a.out.find(term), std::string::npos) << term;
  const auto s = run_command(cli("swamp --help"), "");
  ASSERT_EQ(s.exit_code, 0);
  for (const char* term : {"[dump]", "--dump DIR", "--format FORMAT", "fp8-e4m3", "never paired with itself"})
    EXPECT_NE(s.out.find(term), std::string::npos) << term;
}

}  // namespace
