// `mpverify report-page` on reports folders that attack the page it writes
// (tests/data/hostile/report_page/): figures carrying script, event
// attributes, foreign content, markup after </svg>, declarations or external
// references are left out with a visible note and a warning, the page still
// written (exit 0); links that could run code or leave the folder stay text;
// figures outside the reports folder (by "..", a symlink, an absolute path)
// are refused with exit 2 and their content is nowhere in the output. Each
// check reads the page itself: the strict XML reader walks every element and
// attribute, and the raw text is searched for the attacks' markers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_command.h"
#include "support/xml_checker.h"

namespace {

namespace fs = std::filesystem;
using mpverify::test::run_command;
using mpverify::test::XmlElement;
using mpverify::test::XmlReader;

const fs::path kHostile = MPVERIFY_HOSTILE_DIR;

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
void write(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

// A fresh copy of one of the hostile folders (the page is written into it).
fs::path copy_case(const std::string& folder, const std::string& test) {
  const fs::path dir = fs::temp_directory_path() / ("mpverify-hostile-" + test);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(kHostile / folder, dir, fs::copy_options::recursive);
  return dir;
}

struct Rendered {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  std::string page;    // empty when none was written
};

Rendered render(const fs::path& reports) {
  const fs::path index = reports / "index.html";
  fs::remove(index);
  const auto r = run_command(std::string(MPVERIFY_BIN) + " report-page '" + reports.string() + "'", "", true);
  return {r.exit_code, r.out, fs::exists(index) ? read(index) : std::string()};
}

void collect(const XmlElement& e, std::vector<const XmlElement*>& out) {
  out.push_back(&e);
  for (const XmlElement& c : e.children) collect(c, out);
}

// Every element of the page, read by the strict XML reader (an attack that
// breaks the page's structure fails here).
std::vector<const XmlElement*> elements_of(const std::string& page, XmlElement& root) {
  const std::string doctype = "<!DOCTYPE html>\n";
  EXPECT_EQ(page.rfind(doctype, 0), 0u);
  try {
    root = XmlReader(page.substr(std::min(page.size(), doctype.size()))).parse();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the page is not well-formed: " << e.what();
    return {};
  }
  std::vector<const XmlElement*> all;
  collect(root, all);
  return all;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What no element of a page may hold, whatever its figures: an element that
// runs or embeds something, an event attribute, a reference that is neither
// local (#id) nor a raster image inside the figure, and (in links) a
// scheme other than http(s).
void expect_nothing_active(const std::string& page) {
  XmlElement root;
  int styles = 0;
  for (const XmlElement* e : elements_of(page, root)) {
    const std::string name = lower(e->name);
    for (const char* banned : {"script", "foreignobject", "iframe", "img", "object", "embed", "set", "animate"})
      EXPECT_NE(name, banned) << "<" << e->name << "> on the page";
    styles += name == "style";
    for (const auto& [attribute, value] : e->attributes) {
      EXPECT_NE(lower(attribute).rfind("on", 0), 0u) << attribute << "=\"" << value << "\" on <" << e->name << ">";
      if (attribute != "href" && attribute != "xlink:href" && attribute != "src") continue;
      const std::string v = lower(value);
      const bool local = v.rfind('#', 0) == 0, png = v.rfind("data:image/png;base64,", 0) == 0;
      const bool web = name == "a" && (v.rfind("http://", 0) == 0 || v.rfind("https://", 0) == 0);
      const bool relative = name == "a" && v.find(':') == std::string::npos && v.rfind("//", 0) != 0;
      EXPECT_TRUE(local || png || web || relative) << attribute << "=\"" << value << "\" on <" << e->name << ">";
      EXPECT_EQ(value.find("PWNED"), std::string::npos) << attribute << "=\"" << value << "\"";
    }
  }
  EXPECT_EQ(styles, 1) << "only the page's own <style>";
}

struct HostileFigure {
  const char* file;    // under tests/data/hostile/report_page/svg/
  const char* reason;  // what the warning and the note say, after "left out: "
};

void PrintTo(const HostileFigure& f, std::ostream* os) { *os << f.file; }

const HostileFigure kFigures[] = {
    {"onload.svg", "it has the event attribute onload on <svg>"},
    {"event-attributes.svg", "it has the event attribute onerror on <image>"},
    {"script.svg", "it contains <script>"},
    {"foreign-object.svg", "it contains <foreignObject>"},
    {"after-root.svg", "it has content after </svg>"},
    {"doctype-entity.svg", "it has a DOCTYPE declaration"},
    {"processing-instruction.svg", "it has a processing instruction"},
    {"style-element.svg", "it contains <style>"},
    {"set-attribute.svg", "it contains <set>"},
    {"external-use.svg", "it refers to something outside the figure (xlink:href on <use>)"},
    {"external-image.svg", "it refers to something outside the figure (href on <image>)"},
    {"style-url.svg", "it refers to something outside the figure (url() in style on <rect>)"},
    {"fill-url.svg", "it refers to something outside the figure (url() in fill on <rect>)"},
    {"javascript-href.svg", "it refers to something outside the figure (href on <use>)"},
    {"svg-data-image.svg", "it refers to something outside the figure (href on <image>)"},
};

class HostileFigureTest : public testing::TestWithParam<HostileFigure> {};

// One hostile figure beside the writers' kind of figure: the page is written
// (exit 0), says which figure it left out and why, keeps the other figure and
// the text after it, and holds nothing of the attack.
TEST_P(HostileFigureTest, IsLeftOutWithANoteAndTheRestOfThePageStays) {
  const HostileFigure& f = GetParam();
  std::string test = f.file;
  test.resize(test.size() - 4);
  const fs::path dir = fs::temp_directory_path() / ("mpverify-hostile-figure-" + test);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kHostile / "svg" / f.file, dir / f.file);
  fs::copy_file(kHostile / "svg" / "kept.svg", dir / "kept.svg");
  write(dir / "r.md", std::string("# R\n\n![kept](kept.svg)\n\n![hostile](") + f.file + ")\n\nThe end stays.\n");
  const Rendered r = render(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_FALSE(r.page.empty()) << "no page written: " << r.output;
  EXPECT_NE(r.output.find(std::string("warning: ") + (dir / "r.md").string() + ": image '" + f.file +
                          "' left out: " + f.reason),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.page.find(std::string("image ") + f.file + " left out: "), std::string::npos);
  EXPECT_NE(r.page.find("kept &amp; shown &lt;intact&gt;"), std::string::npos) << "the writers' figure was dropped";
  EXPECT_NE(r.page.find("The end stays."), std::string::npos);
  for (const char* marker : {"PWNED", "evil.example", "<script", "<foreignObject", "<iframe", "<img", "<set",
                             "<!ENTITY", "<?xml", "@import", "javascript:", "data:image/svg", "data:,"})
    EXPECT_EQ(r.page.find(marker), std::string::npos) << marker;
  expect_nothing_active(r.page);
}

INSTANTIATE_TEST_SUITE_P(ReportPageHostile, HostileFigureTest, testing::ValuesIn(kFigures),
                         [](const testing::TestParamInfo<HostileFigure>& param) {
                           std::string name;
                           for (const char* c = param.param.file; *c && *c != '.'; ++c)
                             if (std::isalnum(static_cast<unsigned char>(*c))) name += *c;
                           return name;
                         });

// The whole folder the browser check loads: every hostile figure left out
// (one warning each), the writers' figure kept with its PNG panel, markers,
// rotated label and escaped text.
TEST(ReportPageHostile, EveryHostileFigureOfTheFolderIsLeftOutAndTheWritersFigureKept) {
  const fs::path dir = copy_case("svg", "svg-folder");
  const Rendered r = render(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const HostileFigure& f : kFigures) {
    EXPECT_NE(r.output.find(std::string("image '") + f.file + "' left out: " + f.reason), std::string::npos) << f.file;
    EXPECT_NE(r.page.find(std::string("image ") + f.file + " left out: "), std::string::npos) << f.file;
  }
  std::size_t warnings = 0;
  for (std::size_t at = r.output.find("warning: "); at != std::string::npos; at = r.output.find("warning: ", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, std::size(kFigures));
  EXPECT_EQ(r.page.find("PWNED"), std::string::npos);
  for (const char* kept : {"kept &amp; shown &lt;intact&gt;", "class=\"marker marker-circle\"",
                           "href=\"data:image/png;base64,iVBORw0KGgo", "transform=\"translate(16 70) rotate(-90)\"",
                           "style=\"image-rendering:pixelated\"", "The text after the figures stays too."})
    EXPECT_NE(r.page.find(kept), std::string::npos) << kept;
  expect_nothing_active(r.page);
}

// The links: every target that could run code, load a document of another
// scheme or leave the folder is shown as text; the others stay links.
TEST(ReportPageHostile, OnlyFragmentsWebUrlsAndPathsInsideTheFolderBecomeLinks) {
  const fs::path dir = copy_case("links", "links");
  const Rendered r = render(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  XmlElement root;
  std::multiset<std::string> hrefs;
  std::set<std::string> labels;
  for (const XmlElement* e : elements_of(r.page, root)) {
    if (e->name != "a") continue;
    hrefs.insert(e->attributes.at("href"));
    labels.insert(e->text);
  }
  const std::multiset<std::string> expected{
      "#doc-other",  "#doc-report",   "#report-hostile-links", "https://example.org/page?a=1&b=2",
      "HTTP://example.org/", "#doc-other", "sub/notes.txt", "sub/../other.md#top"};
  EXPECT_EQ(hrefs, expected);
  for (const char* label : {"js", "mixed case", "tab inside", "leading space", "numeric reference", "named colon",
                            "reference first", "vb", "data", "file", "protocol-relative", "backslash host",
                            "absolute path", "climbs out", "climbs out encoded", "climbs out from a folder"})
    EXPECT_EQ(labels.count(label), 0u) << label << " became a link";
  // Shown as the Markdown it was written as, escaped.
  EXPECT_NE(r.page.find("[js](javascript:document.title='PWNED-js')"), std::string::npos);
  EXPECT_NE(r.page.find("[numeric reference](java&amp;#09;script:"), std::string::npos);
  EXPECT_NE(r.page.find("[protocol-relative](//evil.example/PWNED-host)"), std::string::npos);
  EXPECT_EQ(lower(r.page).find("href=\"javascript"), std::string::npos);
  EXPECT_EQ(lower(r.page).find("href=\"data:"), std::string::npos);
  expect_nothing_active(r.page);
}

// A figure outside the reports folder: refused with exit 2 naming it and no
// page written, so its content cannot leak.
void expect_outside_refused(const fs::path& reports, const std::string& target) {
  const Rendered r = render(reports);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("image '" + target + "'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("outside the reports folder"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("TOP-SECRET"), std::string::npos);
  EXPECT_EQ(r.page.find("TOP-SECRET"), std::string::npos);
  EXPECT_TRUE(r.page.empty()) << "a page was written";
}

TEST(ReportPageHostile, AFigureOutsideTheFolderByDotDotIsRefused) {
  const fs::path dir = copy_case("escape", "dotdot");
  expect_outside_refused(dir / "reports", "../outside/secret.svg");
}

TEST(ReportPageHostile, ASymlinkedFigurePointingOutsideTheFolderIsRefused) {
  const fs::path dir = copy_case("escape", "symlink");
  fs::create_symlink("../outside/secret.svg", dir / "reports" / "link.svg");
  write(dir / "reports" / "report.md", "# Escape\n\n![t](link.svg)\n");
  expect_outside_refused(dir / "reports", "link.svg");
}

TEST(ReportPageHostile, AFigureInASymlinkedFolderPointingOutsideIsRefused) {
  const fs::path dir = copy_case("escape", "symlinked-folder");
  fs::create_directory_symlink("../outside", dir / "reports" / "figures");
  write(dir / "reports" / "report.md", "# Escape\n\n![t](figures/secret.svg)\n");
  expect_outside_refused(dir / "reports", "figures/secret.svg");
}

TEST(ReportPageHostile, AFigureByAbsolutePathIsRefused) {
  const fs::path dir = copy_case("escape", "absolute");
  const std::string target = (dir / "outside" / "secret.svg").string();
  write(dir / "reports" / "report.md", "# Escape\n\n![t](" + target + ")\n");
  const Rendered r = render(dir / "reports");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("image '" + target + "'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("TOP-SECRET"), std::string::npos);
  EXPECT_TRUE(r.page.empty()) << "a page was written";
}

// A report that is a link to a file outside the folder is not a report of the folder: it is not read.
TEST(ReportPageHostile, AReportLinkedFromOutsideTheFolderIsNotRead) {
  const fs::path dir = copy_case("escape", "linked-report");
  write(dir / "outside" / "secret.md", "# TOP-SECRET-REPORT\n");
  fs::create_symlink("../outside/secret.md", dir / "reports" / "linked.md");
  write(dir / "reports" / "report.md", "# Inside\n\nText.\n");
  const Rendered r = render(dir / "reports");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.page.find("Inside"), std::string::npos);
  EXPECT_EQ(r.page.find("TOP-SECRET-REPORT"), std::string::npos);
}

// A symlink that stays inside the folder is still a figure of the folder.
TEST(ReportPageHostile, ASymlinkInsideTheFolderIsFollowed) {
  const fs::path dir = copy_case("escape", "symlink-inside");
  fs::copy_file(dir / "outside" / "secret.svg", dir / "reports" / "figure.svg");
  fs::create_symlink("figure.svg", dir / "reports" / "alias.svg");
  write(dir / "reports" / "report.md", "# Inside\n\n![t](alias.svg)\n");
  const Rendered r = render(dir / "reports");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.page.find("TOP-SECRET-CONTENT"), std::string::npos);
}

}  // namespace
