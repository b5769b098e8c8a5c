// The exponent histograms of `mpverify analyze --plot` and `mpverify swamp
// --plot`, read back as XML: the format's "max finite" mark and its label lie
// inside the plot, the swamp plot's x axis says what it counts, and tick
// labels never overlap (widths estimated as 0.6 x font size per character,
// report/svg_histogram.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/npy.h"
#include "io/safetensors.h"
#include "report/svg_histogram.h"
#include "support/run_command.h"
#include "support/xml_checker.h"

namespace {

using mpverify::test::run_command;
using mpverify::test::XmlElement;
using mpverify::test::XmlReader;
using namespace mpverify;
namespace fs = std::filesystem;

std::string cli(const std::string& args) { return std::string(MPVERIFY_BIN) + " " + args; }

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpverify_histogram_plot_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

XmlElement read_svg(const fs::path& file) {
  std::ifstream in(file);
  return XmlReader(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())).parse();
}

std::string class_of(const XmlElement& e) { return e.has("class") ? e.attributes.at("class") : ""; }

// A text element's horizontal extent, from its anchor and estimated width.
std::pair<double, double> extent(const XmlElement& t) {
  const double x = std::stod(t.attributes.at("x"));
  const double w = report::histogram_text_width(t.text.size());
  const std::string anchor = t.has("text-anchor") ? t.attributes.at("text-anchor") : "start";
  if (anchor == "end") return {x - w, x};
  if (anchor == "middle") return {x - w / 2, x + w / 2};
  return {x, x + w};
}

constexpr double kPlotLeft = report::kHistogramLeft, kPlotRight = report::kHistogramLeft + report::kHistogramPlotWidth;

TEST(HistogramPlotCli, AnalyzeKeepsMaxFiniteAndItsLabelInsideThePlot) {
  TempDir d;
  // Values up to 2^8 only: fp16's largest finite value (binade 2^15) is the
  // rightmost thing on the axis, so its label has no data to its right.
  io::write_npy(d.path / "a.npy", std::vector<float>{0x1p-20f, 0x1p-3f, 1.0f, 0x1p8f}, {4});
  const fs::path svg = d.path / "h.svg";
  const auto r = run_command(cli("analyze " + (d.path / "a.npy").string() + " --format fp16 --plot " + svg.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const XmlElement root = read_svg(svg);
  const XmlElement* label = nullptr;
  for (const XmlElement* t : root.all("text"))
    if (class_of(*t) == "mark-label" && t->text == "max finite") label = t;
  ASSERT_NE(label, nullptr);
  const auto [from, to] = extent(*label);
  EXPECT_GE(from, kPlotLeft);
  EXPECT_LE(to, kPlotRight);
  EXPECT_LE(to, std::stod(root.attributes.at("width")));
  // Its line is inside the plot too, at the top of the 2^15 binade (65504 = 2^16 - 2^5).
  bool line_inside = false;
  for (const XmlElement* l : root.all("line"))
    if (l->has("stroke-dasharray")) {
      const double x = std::stod(l->attributes.at("x1"));
      line_inside = line_inside || (x > from - 10 && x < to + 10 && x < kPlotRight);
    }
  EXPECT_TRUE(line_inside);
  // The three marks' labels do not overlap one another.
  std::vector<const XmlElement*> marks;
  for (const XmlElement* t : root.all("text"))
    if (class_of(*t) == "mark-label") marks.push_back(t);
  ASSERT_EQ(marks.size(), 3u);
  for (std::size_t i = 0; i < marks.size(); ++i)
    for (std::size_t j = i + 1; j < marks.size(); ++j) {
      if (marks[i]->attributes.at("y") != marks[j]->attributes.at("y")) continue;
      const auto a = extent(*marks[i]), b = extent(*marks[j]);
      EXPECT_TRUE(a.second <= b.first || b.second <= a.first) << marks[i]->text << " / " << marks[j]->text;
    }
}

TEST(HistogramPlotCli, SwampLabelsItsAxisAndItsTickLabelsDoNotOverlap) {
  TempDir d;
  // |w| / |u| from 2^-100 to 2^100: about 200 binades on 810 pixels.
  std::vector<float> w, u;
  for (int e = -100; e <= 100; e += 5) {
    w.push_back(1.0f);
    u.push_back(std::ldexp(1.0f, -e));
  }
  const std::vector<std::size_t> shape{w.size()};
  io::write_safetensors(d.path / "w.safetensors", {{"p", shape, w}});
  io::write_safetensors(d.path / "u.safetensors", {{"p", shape, u}});
  const fs::path svg = d.path / "r.svg";
  const auto r = run_command(cli("swamp --weights " + (d.path / "w.safetensors").string() + " --updates " +
                                 (d.path / "u.safetensors").string() + " --plot " + svg.string()), "");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const XmlElement root = read_svg(svg);
  std::vector<const XmlElement*> ticks;
  std::string x_label;
  for (const XmlElement* t : root.all("text")) {
    if (class_of(*t) == "tick") ticks.push_back(t);
    if (class_of(*t) == "x-label") x_label = t->text;
  }
  EXPECT_EQ(x_label, "log2(|w|/|u|)");
  ASSERT_GE(ticks.size(), 4u);
  for (std::size_t i = 1; i < ticks.size(); ++i) {
    const double gap = std::stod(ticks[i]->attributes.at("x")) - std::stod(ticks[i - 1]->attributes.at("x"));
    const double width = std::max(report::histogram_text_width(ticks[i]->text.size()),
                                  report::histogram_text_width(ticks[i - 1]->text.size()));
    EXPECT_GE(gap, width) << ticks[i - 1]->text << " and " << ticks[i]->text;
  }
}

}  // namespace
