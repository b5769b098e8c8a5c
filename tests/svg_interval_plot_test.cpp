// report/svg_interval_plot.h: every mark where the documented geometry puts
// it (recomputed here from the header's formulas, not read back from the
// writer), non-finite values left out and counted in the label, escaping,
// well-formed XML, the same input giving the same bytes, and bad input refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "report/svg_interval_plot.h"
#include "support/xml_checker.h"

namespace {

using mpverify::report::IntervalGroup;
using mpverify::report::IntervalPlot;
using mpverify::report::svg_interval_plot;
using mpverify::test::XmlElement;
using mpverify::test::XmlReader;

std::string two(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The groups' <g class=...> children of the root, in document order.
std::vector<const XmlElement*> groups_of(const XmlElement& root, const std::string& cls) {
  std::vector<const XmlElement*> out;
  for (const XmlElement* g : root.all("g"))
    if (g->attributes.at("class") == cls) out.push_back(g);
  return out;
}

IntervalPlot sample() {
  IntervalPlot p;
  p.title = "Differences <&>";
  p.y_label = "points";
  p.margin = 1;
  p.legend = "dots and bars\nand a band";
  p.groups.push_back({"o2", {0.5, -1.5, 2.0}, 0.3333333333333333, -2.0, 2.5});
  p.groups.push_back({"fp8 & co", {0.25, std::numeric_limits<double>::quiet_NaN()}, std::nullopt, std::nullopt,
                      std::nullopt});
  return p;
}

TEST(SvgIntervalPlot, MarksSitWhereTheDocumentedGeometryPutsThem) {
  const IntervalPlot p = sample();
  const std::string svg = svg_interval_plot(p);
  const XmlElement root = XmlReader(svg).parse();
  ASSERT_EQ(root.name, "svg");
  // y spans [min, max] of values, interval ends, estimates and ±margin, [-2, 2.5],
  // padded by 5% of its width on each side.
  const double lo = -2.0 - 0.05 * 4.5, hi = 2.5 + 0.05 * 4.5;
  const double left = 80, top = 40, w_plot = 780, h_plot = 300;
  const auto py = [&](double v) { return top + h_plot - (v - lo) / (hi - lo) * h_plot; };
  const double w = w_plot / 2;

  const auto values = groups_of(root, "values");
  ASSERT_EQ(values.size(), 2u);
  // Group 0: three values, spacing min(6, (w/3)/3) = 6.
  const auto c0 = values[0]->all("circle");
  ASSERT_EQ(c0.size(), 3u);
  const double cx0 = left + 0.5 * w;
  const double expected_y0[] = {0.5, -1.5, 2.0};
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(c0[k]->attributes.at("cx"), two(cx0 - w / 6 + (static_cast<double>(k) - 1.0) * 6)) << k;
    EXPECT_EQ(c0[k]->attributes.at("cy"), two(py(expected_y0[k]))) << k;
  }
  // Group 1: the NaN is not drawn; the finite value keeps its slot (k = 0 of m = 2).
  const auto c1 = values[1]->all("circle");
  ASSERT_EQ(c1.size(), 1u);
  const double cx1 = left + 1.5 * w;
  EXPECT_EQ(c1[0]->attributes.at("cx"), two(cx1 - w / 6 + (0 - 0.5) * 6));
  EXPECT_EQ(c1[0]->attributes.at("cy"), two(py(0.25)));

  // One interval (group 1 has none): the bar, two caps, the square.
  const auto intervals = groups_of(root, "interval");
  ASSERT_EQ(intervals.size(), 1u);
  const auto lines = intervals[0]->all("line");
  ASSERT_EQ(lines.size(), 3u);
  const double bx = cx0 + w / 6;
  EXPECT_EQ(lines[0]->attributes.at("x1"), two(bx));
  EXPECT_EQ(lines[0]->attributes.at("y1"), two(py(2.5)));
  EXPECT_EQ(lines[0]->attributes.at("y2"), two(py(-2.0)));
  const XmlElement* square = intervals[0]->first("rect");
  ASSERT_NE(square, nullptr);
  EXPECT_EQ(square->attributes.at("x"), two(bx - 4));
  EXPECT_EQ(square->attributes.at("y"), two(py(1.0 / 3) - 4));

  // The margin band from +1 to -1 across the plot.
  const XmlElement* band = nullptr;
  for (const XmlElement* r : root.all("rect"))
    if (r->has("class") && r->attributes.at("class") == "margin-band") band = r;
  ASSERT_NE(band, nullptr);
  EXPECT_EQ(band->attributes.at("x"), two(left));
  EXPECT_EQ(band->attributes.at("y"), two(py(1)));
  EXPECT_EQ(band->attributes.at("width"), two(w_plot));
  EXPECT_EQ(band->attributes.at("height"), two(py(-1) - py(1)));

  // Labels: escaped text comes back unescaped; the partly drawn group says so.
  bool title = false, partial = false, band_label = false;
  int legend_lines = 0;
  for (const XmlElement* t : root.all("text")) {
    title = title || t->text == "Differences <&>";
    partial = partial || t->text == "fp8 & co (1 of 2 drawn)";
    band_label = band_label || t->text == "±1 margin";
    legend_lines += t->text == "dots and bars" || t->text == "and a band";
  }
  EXPECT_TRUE(title);
  EXPECT_TRUE(partial);
  EXPECT_TRUE(band_label);
  EXPECT_EQ(legend_lines, 2);  // '\n' splits the legend into lines
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg_interval_plot(p), svg);  // no clock, no randomness
}

TEST(SvgIntervalPlot, NoMarkSitsOnTheFrame) {
  const XmlElement root = XmlReader(svg_interval_plot(sample())).parse();
  const double top = 40, bottom = 40 + 300;
  std::vector<double> ys;
  for (const XmlElement* g : groups_of(root, "values"))
    for (const XmlElement* c : g->all("circle")) ys.push_back(std::stod(c->attributes.at("cy")));
  for (const XmlElement* l : groups_of(root, "interval")[0]->all("line"))
    for (const char* a : {"y1", "y2"}) ys.push_back(std::stod(l->attributes.at(a)));
  ASSERT_EQ(ys.size(), 4u + 6u);
  // The extremes (-2 and 2.5) are an interval's ends: strictly inside, the
  // padding from the edges (5% of the range on each side: 0.05 / 1.1 of the
  // 300 px, 13.64 px; less the printed coordinates' rounding).
  const double padding = 300 * 0.05 / 1.1 - 0.005;
  for (const double y : ys) {
    EXPECT_GE(y, top + padding) << y;
    EXPECT_LE(y, bottom - padding) << y;
  }
}

TEST(SvgIntervalPlot, ValuesAndEstimatesDifferInMarkerAndColour) {
  const XmlElement root = XmlReader(svg_interval_plot(sample())).parse();
  const XmlElement* values = groups_of(root, "values")[0];
  const XmlElement* interval = groups_of(root, "interval")[0];
  EXPECT_FALSE(values->all("circle").empty());  // the values: dots
  EXPECT_TRUE(values->all("rect").empty());
  ASSERT_NE(interval->first("rect"), nullptr);  // the estimate: a square
  EXPECT_TRUE(interval->all("circle").empty());
  EXPECT_NE(values->attributes.at("fill"), interval->first("rect")->attributes.at("fill"));
}

TEST(SvgIntervalPlot, AZeroWidthRangeIsWidenedAndTheMarginAlwaysShows) {
  IntervalPlot p;
  p.margin = 0.5;
  p.groups.push_back({"a", {0.0, 0.0}, std::nullopt, std::nullopt, std::nullopt});
  const XmlElement root = XmlReader(svg_interval_plot(p)).parse();
  // The range is [-0.5, 0.5] (the margin), padded, so 0 sits in the middle of the plot.
  const auto c = groups_of(root, "values")[0]->all("circle");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]->attributes.at("cy"), two(40 + 150));
}

TEST(SvgIntervalPlot, RefusesBadInput) {
  IntervalPlot none;
  none.margin = 1;
  EXPECT_THROW((void)svg_interval_plot(none), std::invalid_argument);
  IntervalPlot p = sample();
  p.margin = 0;
  EXPECT_THROW((void)svg_interval_plot(p), std::invalid_argument);
  p.margin = std::numeric_limits<double>::infinity();
  EXPECT_THROW((void)svg_interval_plot(p), std::invalid_argument);
  p = sample();
  p.groups[0].upper.reset();  // part of an interval
  EXPECT_THROW((void)svg_interval_plot(p), std::invalid_argument);
  p = sample();
  p.groups[0].lower = 3.0;  // lower > upper
  EXPECT_THROW((void)svg_interval_plot(p), std::invalid_argument);
}

}  // namespace
