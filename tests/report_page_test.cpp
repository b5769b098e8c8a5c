// The report building blocks: the SVG line chart (every point where the
// documented geometry puts it, recomputed here; padded axes, so that no point
// is on the frame; markers that tell series apart; broken lines; the log2 axis;
// escaping; well-formed XML) and the HTML page of Markdown reports (parsed
// back by a strict XML reader: structure, inlined figures, escaping, links,
// refusal of images that would make the page depend on something outside it).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "report/html_page.h"
#include "report/svg_line_chart.h"
#include "support/xml_checker.h"

namespace {

namespace fs = std::filesystem;
using mpverify::report::LineChart;
using mpverify::report::LineSeries;
using mpverify::test::XmlElement;
using mpverify::test::XmlReader;

void collect(const XmlElement& e, const std::string& name, std::vector<const XmlElement*>& out) {
  if (e.name == name) out.push_back(&e);
  for (const XmlElement& c : e.children) collect(c, name, out);
}
std::vector<const XmlElement*> all_named(const XmlElement& root, const std::string& name) {
  std::vector<const XmlElement*> out;
  collect(root, name, out);
  return out;
}

std::vector<std::pair<double, double>> polyline_points(const XmlElement& polyline) {
  std::vector<std::pair<double, double>> points;
  std::istringstream in(polyline.attributes.at("points"));
  std::string pair;
  while (in >> pair) {
    const std::size_t comma = pair.find(',');
    points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return points;
}

// Coordinates are written with two decimals: within 0.005 of the exact value
// (half of the last digit), plus a margin for the binary representation of
// the decimal read back (far below 1e-9 at these magnitudes).
constexpr double kPrinted = 0.005 + 1e-9;

// The documented mapping, computed here from the chart's constants: the data's
// extent [lo, hi] padded by kLineChartPad of its width on each side.
double padded_lo(double lo, double hi) { return lo - mpverify::report::kLineChartPad * (hi - lo); }
double padded_hi(double lo, double hi) { return hi + mpverify::report::kLineChartPad * (hi - lo); }
double px(double x, double lo, double hi) {
  const double a = padded_lo(lo, hi), b = padded_hi(lo, hi);
  return mpverify::report::kLineChartLeft + (x - a) / (b - a) * mpverify::report::kLineChartPlotWidth;
}
double py(double y, double lo, double hi) {
  const double a = padded_lo(lo, hi), b = padded_hi(lo, hi);
  return mpverify::report::kLineChartTop + mpverify::report::kLineChartPlotHeight -
         (y - a) / (b - a) * mpverify::report::kLineChartPlotHeight;
}

// The series' <g class="series"> groups, in order.
std::vector<const XmlElement*> series_groups(const XmlElement& root) {
  std::vector<const XmlElement*> out;
  for (const XmlElement* g : all_named(root, "g"))
    if (g->has("class") && g->attributes.at("class") == "series") out.push_back(g);
  return out;
}

// A marker's shape (from its class "marker marker-SHAPE") and centre (a
// circle's centre, a polygon's vertex mean).
struct MarkerMark {
  std::string shape;
  double x = 0, y = 0;
};
std::vector<MarkerMark> markers_in(const XmlElement& e) {
  std::vector<MarkerMark> out;
  std::vector<const XmlElement*> elements = all_named(e, "circle");
  for (const XmlElement* p : all_named(e, "polygon")) elements.push_back(p);
  for (const XmlElement* m : elements) {
    if (!m->has("class") || m->attributes.at("class").rfind("marker marker-", 0) != 0) continue;
    MarkerMark mark{m->attributes.at("class").substr(14)};
    if (m->name == "circle") {
      mark.x = std::stod(m->attributes.at("cx"));
      mark.y = std::stod(m->attributes.at("cy"));
    } else {
      const auto vertices = polyline_points(*m);
      for (const auto& [x, y] : vertices) {
        mark.x += x / static_cast<double>(vertices.size());
        mark.y += y / static_cast<double>(vertices.size());
      }
    }
    out.push_back(mark);
  }
  return out;
}

// A polygon's vertices are printed with two decimals each: their mean is as
// close as one of them.
constexpr double kMarkerCentre = kPrinted;

TEST(SvgLineChart, PointsLieWhereTheGeometrySaysAndNonFiniteValuesBreakTheLine) {
  LineChart chart{"loss", "step", "value", false, {}};
  chart.series.push_back({"a", {{0, 1}, {10, 3}, {20, 2}}, false});
  chart.series.push_back({"b", {{5, 0.5}, {15, std::nan("")}, {20, 4}}, true});
  const std::string svg = mpverify::report::svg_line_chart(chart);
  const XmlElement root = XmlReader(svg).parse();
  ASSERT_EQ(root.name, "svg");
  const auto groups = series_groups(root);
  ASSERT_EQ(groups.size(), 2u);
  // x spans [0, 20], y spans [0.5, 4] (all finite points of both series), padded.
  const auto a = all_named(*groups[0], "polyline");
  ASSERT_EQ(a.size(), 1u);
  const auto pa = polyline_points(*a[0]);
  const std::vector<std::pair<double, double>> expected_a{{0, 1}, {10, 3}, {20, 2}};
  ASSERT_EQ(pa.size(), expected_a.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_NEAR(pa[i].first, px(expected_a[i].first, 0, 20), kPrinted) << i;
    EXPECT_NEAR(pa[i].second, py(expected_a[i].second, 0.5, 4), kPrinted) << i;
  }
  // A short series has a marker on every point.
  const auto ma = markers_in(*groups[0]);
  ASSERT_EQ(ma.size(), 3u);
  for (std::size_t i = 0; i < ma.size(); ++i) {
    EXPECT_EQ(ma[i].shape, "circle");
    EXPECT_NEAR(ma[i].x, pa[i].first, kMarkerCentre) << i;
    EXPECT_NEAR(ma[i].y, pa[i].second, kMarkerCentre) << i;
  }
  // Series b: the NaN splits it into two single points, drawn as its markers only.
  EXPECT_TRUE(all_named(*groups[1], "polyline").empty());
  const auto mb = markers_in(*groups[1]);
  ASSERT_EQ(mb.size(), 2u);
  EXPECT_EQ(mb[0].shape, "square");
  EXPECT_NEAR(mb[0].x, px(5, 0, 20), kMarkerCentre);
  EXPECT_NEAR(mb[0].y, py(0.5, 0.5, 4), kMarkerCentre);
  EXPECT_NEAR(mb[1].x, px(20, 0, 20), kMarkerCentre);
  EXPECT_NEAR(mb[1].y, py(4, 0.5, 4), kMarkerCentre);
  EXPECT_EQ(groups[1]->attributes.at("stroke-dasharray"), "6 4");
  // The extremes sit the padding inside the plot's corners: (x_min, y_max) top left.
  EXPECT_NEAR(py(4, 0.5, 4), mpverify::report::kLineChartTop + 0.05 / 1.1 * mpverify::report::kLineChartPlotHeight,
              1e-9);
  // The same input gives the same bytes.
  EXPECT_EQ(svg, mpverify::report::svg_line_chart(chart));
}

TEST(SvgLineChart, EveryPointIsStrictlyInsideTheFrameAndSeriesDifferInMarkerAndColour) {
  LineChart chart{"rates", "step", "rate", false, {}};
  chart.series.push_back({"zero", {{0, 0}, {1, 0}, {2, 0}}, false});
  chart.series.push_back({"max", {{0, 1}, {1, 0.5}, {2, 1}}, false});
  const XmlElement root = XmlReader(mpverify::report::svg_line_chart(chart)).parse();
  const XmlElement* frame = nullptr;
  for (const XmlElement* r : all_named(root, "rect"))
    if (r->has("class") && r->attributes.at("class") == "frame") frame = r;
  ASSERT_NE(frame, nullptr);
  const double x0 = std::stod(frame->attributes.at("x")), y0 = std::stod(frame->attributes.at("y"));
  const double x1 = x0 + std::stod(frame->attributes.at("width")), y1 = y0 + std::stod(frame->attributes.at("height"));
  const auto groups = series_groups(root);
  ASSERT_EQ(groups.size(), 2u);
  std::vector<std::pair<double, double>> points;
  for (const XmlElement* g : groups) {
    for (const XmlElement* l : all_named(*g, "polyline"))
      for (const auto& p : polyline_points(*l)) points.push_back(p);
    for (const MarkerMark& m : markers_in(*g)) points.emplace_back(m.x, m.y);
  }
  ASSERT_EQ(points.size(), 12u);  // 6 line vertices, 6 markers
  for (const auto& [x, y] : points) {
    EXPECT_GT(x, x0) << x;
    EXPECT_LT(x, x1) << x;
    EXPECT_GT(y, y0) << y;  // the maximum, 1, below the top edge
    EXPECT_LT(y, y1) << y;  // 0 above the bottom edge
  }
  // Told apart by colour and by marker, in the plot and in the legend.
  const auto m0 = markers_in(*groups[0]), m1 = markers_in(*groups[1]);
  ASSERT_FALSE(m0.empty());
  ASSERT_FALSE(m1.empty());
  EXPECT_NE(m0[0].shape, m1[0].shape);
  EXPECT_NE(groups[0]->attributes.at("stroke"), groups[1]->attributes.at("stroke"));
  const std::size_t all_markers = markers_in(root).size();
  EXPECT_EQ(all_markers, m0.size() + m1.size() + 2);  // one more of each in the legend
}

TEST(SvgLineChart, ALongSeriesHasAboutADozenMarkers) {
  LineChart chart{"loss", "step", "loss", false, {}};
  LineSeries s{"long", {}, false};
  for (int k = 0; k < 1000; ++k) s.points.emplace_back(k, std::sin(k / 50.0));
  chart.series.push_back(s);
  const XmlElement root = XmlReader(mpverify::report::svg_line_chart(chart)).parse();
  const auto m = markers_in(*series_groups(root)[0]);
  EXPECT_GE(m.size(), 10u);
  EXPECT_LE(m.size(), 13u);
}

TEST(SvgLineChart, Log2AxisPlacesPowersOfTwoOnTicksAndSkipsNonPositiveValues) {
  LineChart chart{"scale", "step", "loss scale", true, {}};
  chart.series.push_back({"torch", {{0, 65536}, {1, 32768}, {2, 0}, {3, 32768}}, false});
  const XmlElement root = XmlReader(mpverify::report::svg_line_chart(chart)).parse();
  const auto lines = all_named(root, "polyline");
  ASSERT_EQ(lines.size(), 1u);  // (0, 2^16), (1, 2^15); the 0 breaks it; (3, 2^15) stands alone
  const auto p = polyline_points(*lines[0]);
  ASSERT_EQ(p.size(), 2u);
  // log2 y spans [15, 16], padded: 2^16 near the top edge, 2^15 near the bottom.
  EXPECT_NEAR(p[0].second, py(16, 15, 16), kPrinted);
  EXPECT_NEAR(p[1].second, py(15, 15, 16), kPrinted);
  EXPECT_NEAR(p[1].first, px(1, 0, 3), kPrinted);
  const auto markers = markers_in(*series_groups(root)[0]);
  ASSERT_EQ(markers.size(), 3u);  // a marker on each drawable point
  EXPECT_NEAR(markers[2].x, px(3, 0, 3), kMarkerCentre);
  std::vector<std::string> labels;
  for (const XmlElement* t : all_named(root, "text")) labels.push_back(t->text);
  EXPECT_NE(std::find(labels.begin(), labels.end(), "2^15"), labels.end());
  EXPECT_NE(std::find(labels.begin(), labels.end(), "2^16"), labels.end());
}

TEST(SvgLineChart, Log10AxisForRatesSpanningDecades) {
  LineChart chart{"rates", "step", "rate", false, {}};
  chart.log10_y = true;
  chart.series.push_back({"underflow", {{0, 1e-5}, {1, 0}, {2, 1e-3}, {3, 1e-1}}, false});
  const XmlElement root = XmlReader(mpverify::report::svg_line_chart(chart)).parse();
  const auto lines = all_named(root, "polyline");
  ASSERT_EQ(lines.size(), 1u);  // (0, 1e-5) alone (a marker), then (2, 1e-3), (3, 1e-1)
  const auto p = polyline_points(*lines[0]);
  ASSERT_EQ(p.size(), 2u);
  // log10 y spans [-5, -1] (padded); 1e-3 is halfway.
  EXPECT_NEAR(p[0].second, py(-3, -5, -1), kPrinted);
  EXPECT_NEAR(p[1].second, py(-1, -5, -1), kPrinted);
  const auto markers = markers_in(*series_groups(root)[0]);
  ASSERT_EQ(markers.size(), 3u);
  EXPECT_NEAR(markers[0].y, py(-5, -5, -1), kMarkerCentre);
  std::vector<std::string> labels;
  for (const XmlElement* t : all_named(root, "text")) labels.push_back(t->text);
  EXPECT_NE(std::find(labels.begin(), labels.end(), "1e-3"), labels.end());
  chart.log2_y = true;
  EXPECT_THROW((void)mpverify::report::svg_line_chart(chart), std::invalid_argument);
}

TEST(SvgLineChart, TextIsEscapedAndDegenerateDataStillDraws) {
  const std::string label = "fp16 <o2> & \"master\"";
  LineChart chart{"a < b & c", "x", "y", false, {}};
  chart.series.push_back({label, {{3, 7}}, false});  // one point: both ranges widened to +-1
  const std::string svg = mpverify::report::svg_line_chart(chart);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  const XmlElement root = XmlReader(svg).parse();
  std::vector<std::string> texts;
  for (const XmlElement* t : all_named(root, "text")) texts.push_back(t->text);
  EXPECT_NE(std::find(texts.begin(), texts.end(), label), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "a < b & c"), texts.end());
  const auto markers = markers_in(*series_groups(root)[0]);
  ASSERT_EQ(markers.size(), 1u);
  EXPECT_NEAR(markers[0].x, px(3, 2, 4), kMarkerCentre);
  EXPECT_NEAR(markers[0].y, py(7, 6, 8), kMarkerCentre);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-report-page-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

// The page without its doctype line, which the strict reader does not take.
XmlElement parse_page(const std::string& page) {
  const std::string doctype = "<!DOCTYPE html>\n";
  EXPECT_EQ(page.rfind(doctype, 0), 0u);
  return XmlReader(page.substr(doctype.size())).parse();
}

const XmlElement* with_id(const XmlElement& root, const std::string& name, const std::string& id) {
  for (const XmlElement* e : all_named(root, name))
    if (e->has("id") && e->attributes.at("id") == id) return e;
  return nullptr;
}

TEST(HtmlPage, OneSelfContainedPageWithEveryReportAndItsFiguresInlined) {
  const fs::path dir = fresh_dir("page");
  write(dir / "fig.svg", "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" "
                         "height=\"10\"><circle cx=\"5\" cy=\"5\" r=\"4\"/></svg>\n");
  write(dir / "a.md",
        "# Report A\n\nFirst line with `code <x> & y` and **bold *inner* end**\ncontinues here.\n\n"
        "- item one\n  continued\n- item two, see [the other](b.md)\n\n"
        "| name | value |\n|---|---:|\n| `a|b` | 1.5 |\n| c | 2 |\n\n"
        "```\n<tag> & \"q\"\n  indented\n```\n\n![A figure](fig.svg)\n\n## Report A\n\n1. first\n2. second\n");
  write(dir / "b.md", "# Report B\n\nPlain text with 2 * 3 and a < b.\n");
  const std::string page = mpverify::report::html_page("All <reports>", {dir / "a.md", dir / "b.md"});
  const XmlElement html = parse_page(page);
  ASSERT_EQ(html.name, "html");
  const XmlElement* head = html.first("head");
  ASSERT_NE(head, nullptr);
  ASSERT_NE(head->first("title"), nullptr);
  EXPECT_EQ(head->first("title")->text, "All <reports>");
  // Nothing is fetched: no script, link, img, iframe; no src attribute; no remote href.
  for (const char* tag : {"script", "link", "img", "iframe", "object"}) EXPECT_TRUE(all_named(html, tag).empty()) << tag;
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("href=\"http"), std::string::npos);
  // One section per report, in order, each with its heading ids (unique ones).
  const auto sections = all_named(html, "section");
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_EQ(sections[0]->attributes.at("id"), "doc-a");
  EXPECT_EQ(sections[1]->attributes.at("id"), "doc-b");
  ASSERT_NE(with_id(html, "h1", "a-report-a"), nullptr);
  ASSERT_NE(with_id(html, "h2", "a-report-a-2"), nullptr);
  EXPECT_EQ(with_id(html, "h1", "a-report-a")->text, "Report A");
  // Inline markup, unescaped on reading back.
  const auto paragraphs = all_named(*sections[0], "p");
  ASSERT_FALSE(paragraphs.empty());
  ASSERT_NE(paragraphs[0]->first("code"), nullptr);
  EXPECT_EQ(paragraphs[0]->first("code")->text, "code <x> & y");
  ASSERT_NE(paragraphs[0]->first("strong"), nullptr);
  ASSERT_NE(paragraphs[0]->first("strong")->first("em"), nullptr);
  EXPECT_EQ(paragraphs[0]->first("strong")->first("em")->text, "inner");
  // The list: two items, the first continued; the link to b.md points at its section.
  const auto items = all_named(*sections[0], "ul")[0]->all("li");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0]->text, "item one\ncontinued");
  ASSERT_NE(items[1]->first("a"), nullptr);
  EXPECT_EQ(items[1]->first("a")->attributes.at("href"), "#doc-b");
  ASSERT_EQ(all_named(*sections[0], "ol").size(), 1u);
  EXPECT_EQ(all_named(*sections[0], "ol")[0]->all("li").size(), 2u);
  // The table: header, alignment, a '|' inside a code span kept in its cell.
  const auto tables = all_named(*sections[0], "table");
  ASSERT_EQ(tables.size(), 1u);
  const auto ths = all_named(*tables[0], "th");
  ASSERT_EQ(ths.size(), 2u);
  EXPECT_EQ(ths[1]->attributes.at("style"), "text-align:right");
  const auto tds = all_named(*tables[0], "td");
  ASSERT_EQ(tds.size(), 4u);
  ASSERT_NE(tds[0]->first("code"), nullptr);
  EXPECT_EQ(tds[0]->first("code")->text, "a|b");
  EXPECT_EQ(tds[1]->text, "1.5");
  // The fenced code, verbatim.
  const auto pres = all_named(*sections[0], "pre");
  ASSERT_EQ(pres.size(), 1u);
  EXPECT_EQ(pres[0]->first("code")->text, "<tag> & \"q\"\n  indented\n");
  // The figure: the SVG element itself, its XML declaration dropped.
  const auto svgs = all_named(*sections[0], "svg");
  ASSERT_EQ(svgs.size(), 1u);
  EXPECT_EQ(svgs[0]->first("circle")->attributes.at("r"), "4");
  EXPECT_EQ(page.find("<?xml"), std::string::npos);
  // Plain text with special characters stays text.
  EXPECT_EQ(all_named(*sections[1], "p")[0]->text, "Plain text with 2 * 3 and a < b.");
  // The table of contents names each report by its first heading.
  const auto nav_links = all_named(*html.first("body")->first("header")->first("nav"), "a");
  ASSERT_EQ(nav_links.size(), 2u);
  EXPECT_EQ(nav_links[0]->text, "Report A");
  EXPECT_EQ(nav_links[1]->attributes.at("href"), "#doc-b");
  // Deterministic.
  EXPECT_EQ(page, mpverify::report::html_page("All <reports>", {dir / "a.md", dir / "b.md"}));
}

TEST(HtmlPage, RefusesImagesThatWouldNotBeSelfContained) {
  const fs::path dir = fresh_dir("refuse");
  for (const std::string target : {"https://example.org/x.svg", "missing.svg", "picture.png", "/etc/x.svg"}) {
    write(dir / "r.md", "# R\n\n![x](" + target + ")\n");
    try {
      (void)mpverify::report::html_page("t", {dir / "r.md"});
      ADD_FAILURE() << target << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("r.md"), std::string::npos) << e.what();
    }
  }
}

TEST(HtmlPage, ReportFilesPutTheChosenReportFirstThenTheOthersByName) {
  const fs::path dir = fresh_dir("order");
  for (const char* name : {"ops.md", "study.md", "a.md", "notes.txt"}) write(dir / name, "# x\n");
  const auto files = mpverify::report::report_files(dir, {"study.md"});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].filename(), "study.md");
  EXPECT_EQ(files[1].filename(), "a.md");
  EXPECT_EQ(files[2].filename(), "ops.md");
}

TEST(HtmlPage, ReportFilesFollowTheGivenOrderAndSkipAbsentNames) {
  const fs::path dir = fresh_dir("order-list");
  for (const char* name : {"ops.md", "study.md", "a.md", "z.md"}) write(dir / name, "# x\n");
  const auto files = mpverify::report::report_files(dir, {"z.md", "missing.md", "study.md"});
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].filename(), "z.md");
  EXPECT_EQ(files[1].filename(), "study.md");
  EXPECT_EQ(files[2].filename(), "a.md");
  EXPECT_EQ(files[3].filename(), "ops.md");
}

}  // namespace
