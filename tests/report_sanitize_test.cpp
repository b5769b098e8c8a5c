// The reports page's two rules on their own: report/svg_sanitize.h (the
// figure writers' output passes unchanged; each kind of active or external
// content, and XML it cannot read, is refused with its reason) and
// report/link_policy.h (which link targets are links, which stay text, which
// paths stay inside a folder). The page and the program on hostile folders:
// tests/report_page_hostile_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "report/link_policy.h"
#include "report/svg_image_grid.h"
#include "report/svg_interval_plot.h"
#include "report/svg_line_chart.h"
#include "report/svg_sanitize.h"

namespace {

namespace fs = std::filesystem;
using mpverify::report::LinkKind;
using mpverify::report::sanitize_svg;
using mpverify::report::SvgRefused;

std::string without_trailing_newlines(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The reason sanitize_svg gives, or "accepted".
std::string refusal(const std::string& svg) {
  try {
    (void)sanitize_svg(svg);
    return "accepted";
  } catch (const SvgRefused& e) {
    return e.what();
  }
}

const std::string kOpen = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\">";

TEST(SvgSanitize, TheFigureWritersOutputPassesByteForByte) {
  mpverify::report::LineChart chart{"loss <o2> & \"fp16\" 'x'", "step", "loss", false, {}};
  chart.series.push_back({"a & b", {{0, 1}, {1, 2}, {2, 1.5}}, true, {{1, 2}}});
  const std::string line = mpverify::report::svg_line_chart(chart);
  EXPECT_EQ(sanitize_svg(line), without_trailing_newlines(line));

  mpverify::report::ImageGridFigure grid;
  grid.title = "samples";
  grid.side = 2;
  grid.columns = 2;
  grid.panels.push_back({"fp32", {0, 0.5f, 1, 0.25f, 1, 1, 0, 0}, "none"});
  grid.panels.push_back({"empty", {}, "no images"});
  grid.note = "a note";
  const std::string images = mpverify::report::svg_image_grid(grid);
  ASSERT_NE(images.find("data:image/png;base64,"), std::string::npos);
  EXPECT_EQ(sanitize_svg(images), without_trailing_newlines(images));

  mpverify::report::IntervalPlot plot;
  plot.title = "differences";
  plot.y_label = "difference";
  plot.margin = 0.1;
  plot.groups.push_back({"o2", {0.01, -0.02, 0.03}, 0.0, -0.05, 0.05});
  plot.legend = "dots: seeds\nsquare: mean";
  const std::string intervals = mpverify::report::svg_interval_plot(plot);
  EXPECT_EQ(sanitize_svg(intervals), without_trailing_newlines(intervals));
}

TEST(SvgSanitize, WritesTheParsedTreeAgainNormalisingQuotesEntitiesAndComments) {
  const std::string in =
      "\xEF\xBB\xBF<?xml version='1.0'?>\n<!-- made by hand -->\n<svg xmlns='http://www.w3.org/2000/svg'>"
      "<!-- inside --><text x='1' fill=\"url( '#grad' )\">a &#60;b&#x3E; &amp; &quot;c&quot;</text>"
      "<use href=\" #icon \"/><rect style=\"fill: rgb(1, 2, 3); stroke-width: 2px\"/></svg>\n<!-- end -->\n";
  EXPECT_EQ(sanitize_svg(in),
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"1\" fill=\"url( &apos;#grad&apos; )\">a &lt;b&gt; "
            "&amp; &quot;c&quot;</text><use href=\" #icon \"/><rect style=\"fill: rgb(1, 2, 3); stroke-width: "
            "2px\"/></svg>");
}

TEST(SvgSanitize, RefusesActiveAndExternalContentNamingWhat) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {kOpen + "<script>alert(1)</script></svg>", "it contains <script>"},
      {"<svg onload=\"x()\"/>", "it has the event attribute onload on <svg>"},
      {kOpen + "<rect OnClick=\"x()\"/></svg>", "it has the event attribute OnClick on <rect>"},
      {kOpen + "<foreignObject/></svg>", "it contains <foreignObject>"},
      {kOpen + "<a href=\"#x\"/></svg>", "it contains <a>"},
      {kOpen + "<animate attributeName=\"href\"/></svg>", "it contains <animate>"},
      {kOpen + "<style>rect{}</style></svg>", "it contains <style>"},
      {kOpen + "<rect data-x=\"1\"/></svg>", "it has the attribute data-x on <rect>"},
      {kOpen + "</svg><img src=x onerror=alert(1)>", "it has content after </svg>"},
      {kOpen + "</svg>trailing text", "it has content after </svg>"},
      {"<!DOCTYPE svg>" + kOpen + "</svg>", "it has a DOCTYPE declaration"},
      {"<?xml-stylesheet href=\"x.css\"?>" + kOpen + "</svg>", "it has a processing instruction (xml-stylesheet)"},
      {kOpen + "<?php echo 1 ?></svg>", "it has a processing instruction (php)"},
      {kOpen + "<text><![CDATA[<script>]]></text></svg>", "it has a CDATA section"},
      {kOpen + "<text>&nbsp;</text></svg>", "it uses the entity &nbsp;"},
      {kOpen + "<title><rect/></title></svg>", "it has an element inside <title>"},
      {"<html><svg/></html>", "its root element is <html>, not <svg>"},
      {kOpen + "<use href=\"https://h/x.svg#a\"/></svg>", "it refers to something outside the figure (href on <use>)"},
      {kOpen + "<use href=\"x.svg#a\"/></svg>", "it refers to something outside the figure (href on <use>)"},
      {kOpen + "<linearGradient xlink:href=\"javascript:x\"/></svg>",
       "it refers to something outside the figure (xlink:href on <linearGradient>)"},
      {kOpen + "<image href=\"pic.png\"/></svg>", "it refers to something outside the figure (href on <image>)"},
      {kOpen + "<image href=\"data:text/html;base64,PHA+\"/></svg>",
       "it refers to something outside the figure (href on <image>)"},
      {kOpen + "<image href=\"data:image/png;base64,iV\"/><rect fill=\"url(other.svg#g)\"/></svg>",
       "it refers to something outside the figure (url() in fill on <rect>)"},
      {kOpen + "<rect style=\"fill:url(&quot;http://h/p&quot;)\"/></svg>",
       "it refers to something outside the figure (url() in style on <rect>)"},
      {kOpen + "<rect fill=\"u\\72l(http://h)\"/></svg>", "it has a backslash in fill on <rect>"},
      {kOpen + "<rect style=\"behavior: url(#x)\"/></svg>",
       "it has a style other than presentation properties (style on <rect>)"},
      {kOpen + "<rect style=\"fill: expression(alert(1))\"/></svg>",
       "it has a style other than presentation properties (style on <rect>)"},
      {kOpen + "<rect style=\"fill: red; @import x\"/></svg>",
       "it has a style other than presentation properties (style on <rect>)"},
      {"<svg xmlns=\"http://www.w3.org/1999/xhtml\"/>", "it declares another namespace (xmlns on <svg>)"},
  };
  for (const auto& [svg, reason] : cases) EXPECT_EQ(refusal(svg), reason) << svg;
}

TEST(SvgSanitize, RefusesWhatItCannotReadAsXml) {
  for (const std::string& svg :
       {kOpen + "<rect>", kOpen + "<g></rect></svg>", kOpen + "<rect x=1/></svg>",
        kOpen + "<rect x=\"1\"x=\"2\"/></svg>",
        kOpen + "<rect x=\"1\" x=\"2\"/></svg>", kOpen + "<rect x=\"a<b\"/></svg>", kOpen + "<text>a & b</text></svg>",
        kOpen + "<text>&#0;</text></svg>", kOpen + "<text>&#xD800;</text></svg>", kOpen + "<!-- open</svg>",
        std::string(""), std::string("plain text")}) {
    EXPECT_EQ(refusal(svg).rfind("it is not well-formed XML (", 0), 0u) << svg << ": " << refusal(svg);
  }
}

TEST(SvgSanitize, DeepNestingIsRefusedWithoutExhaustingTheStack) {
  std::string svg = kOpen;
  for (int k = 0; k < 100000; ++k) svg += "<g>";
  EXPECT_EQ(refusal(svg), "it nests elements more than 64 deep");
}

TEST(LinkPolicy, KindsByTheTargetsText) {
  const std::vector<std::pair<std::string, LinkKind>> cases{
      {"#section", LinkKind::fragment},
      {"https://example.org/a?b=1&c=2", LinkKind::web},
      {"HtTp://example.org", LinkKind::web},
      {"other.md", LinkKind::relative},
      {"a/b.md#x", LinkKind::relative},
      {"a/b:c", LinkKind::relative},  // a colon after the first '/' is no scheme
      {"javascript:alert(1)", LinkKind::refused},
      {"JaVaScRiPt:alert(1)", LinkKind::refused},
      {"java\tscript:alert(1)", LinkKind::refused},
      {"java\nscript:alert(1)", LinkKind::refused},
      {" javascript:alert(1)", LinkKind::refused},
      {"java&#09;script:alert(1)", LinkKind::refused},
      {"&#106;avascript:alert(1)", LinkKind::refused},
      {"javascript&colon;alert(1)", LinkKind::refused},
      {"vbscript:msgbox", LinkKind::refused},
      {"data:text/html,<script>", LinkKind::refused},
      {"file:///etc/passwd", LinkKind::refused},
      {"mailto:a@b", LinkKind::refused},
      {"//evil.example/x", LinkKind::refused},
      {"/etc/passwd", LinkKind::refused},
      {"\\\\evil.example\\x", LinkKind::refused},
      {"https:evil.example", LinkKind::refused},
      {"https:///path", LinkKind::refused},
      {"", LinkKind::refused},
  };
  for (const auto& [target, kind] : cases)
    EXPECT_EQ(static_cast<int>(mpverify::report::link_kind(target)), static_cast<int>(kind)) << target;
}

TEST(LinkPolicy, RelativeLinksStayInsideTheFolderSymlinksResolved) {
  const fs::path root = fs::temp_directory_path() / "mpverify-link-policy";
  fs::remove_all(root);
  fs::create_directories(root / "reports" / "sub");
  fs::create_directories(root / "outside");
  fs::create_directory_symlink("../outside", root / "reports" / "away");
  const fs::path reports = root / "reports";
  using mpverify::report::link_allowed;
  EXPECT_TRUE(link_allowed("sub/x.md", reports));
  EXPECT_TRUE(link_allowed("sub/../x.md#a", reports));
  EXPECT_TRUE(link_allowed("missing/x.md", reports));  // not there yet: judged by its path
  EXPECT_TRUE(link_allowed("?query", reports));
  EXPECT_FALSE(link_allowed("../outside/x.md", reports));
  EXPECT_FALSE(link_allowed("sub/../../x.md", reports));
  EXPECT_FALSE(link_allowed("%2e%2e/x.md", reports));
  EXPECT_FALSE(link_allowed("%2E%2E%2Fx.md", reports));
  EXPECT_FALSE(link_allowed("away/x.md", reports));  // a symlink out of the folder
  EXPECT_FALSE(link_allowed("javascript:x", reports));
  // Without a folder: by the text alone.
  EXPECT_TRUE(link_allowed("a/../b.md", {}));
  EXPECT_FALSE(link_allowed("a/../../b.md", {}));
  EXPECT_TRUE(mpverify::report::lies_inside(reports / "sub" / "f.svg", reports));
  EXPECT_TRUE(mpverify::report::lies_inside(reports, reports));
  EXPECT_FALSE(mpverify::report::lies_inside(reports / "away" / "f.svg", reports));
  EXPECT_FALSE(mpverify::report::lies_inside(root / "reports-other" / "f.svg", reports));
}

}  // namespace
