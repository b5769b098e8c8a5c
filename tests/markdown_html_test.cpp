// report/html_page.h's Markdown: lists nested in list items (as the reports
// and the README write them), escaped pipes inside table cells and collapsed
// <details> blocks, parsed back by the strict XML reader.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/html_page.h"
#include "support/xml_checker.h"

namespace {

using mpverify::test::XmlElement;
using mpverify::test::XmlReader;

XmlElement render(const std::string& markdown) {
  const mpverify::report::ImageInliner no_images = [](const std::string&, const std::string&) { return std::string(); };
  const std::string html = mpverify::report::markdown_to_html(markdown, "doc", {"doc"}, no_images);
  return XmlReader("<body>" + html + "</body>").parse();
}

std::vector<const XmlElement*> children_named(const XmlElement& e, const std::string& name) {
  std::vector<const XmlElement*> out;
  for (const XmlElement& c : e.children)
    if (c.name == name) out.push_back(&c);
  return out;
}

void collect(const XmlElement& e, const std::string& name, std::vector<const XmlElement*>& out) {
  if (e.name == name) out.push_back(&e);
  for (const XmlElement& c : e.children) collect(c, name, out);
}
std::vector<const XmlElement*> descendants(const XmlElement& root, const std::string& name) {
  std::vector<const XmlElement*> out;
  collect(root, name, out);
  return out;
}

// The text directly in an element (its own text, not its children's), trimmed.
std::string own_text(const XmlElement& e) {
  std::string t = e.text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

TEST(MarkdownHtml, ABulletListNestedInABulletItemIsAListInsideThatItem) {
  const XmlElement body = render(
      "- **CNN** on mnist.\n"
      "  - Baseline: fp32.\n"
      "  - Candidates: o2,\n"
      "    one per scale.\n"
      "- **DCGAN** on mnist.\n");
  const auto lists = children_named(body, "ul");
  ASSERT_EQ(lists.size(), 1u);
  const auto items = children_named(*lists[0], "li");
  ASSERT_EQ(items.size(), 2u);
  const auto inner = children_named(*items[0], "ul");
  ASSERT_EQ(inner.size(), 1u);
  const auto inner_items = children_named(*inner[0], "li");
  ASSERT_EQ(inner_items.size(), 2u);
  EXPECT_EQ(own_text(*inner_items[0]), "Baseline: fp32.");
  EXPECT_EQ(own_text(*inner_items[1]), "Candidates: o2,\none per scale.");  // continued by a deeper line
  EXPECT_TRUE(children_named(*items[1], "ul").empty());
  ASSERT_NE(items[1]->first("strong"), nullptr);
  EXPECT_EQ(items[1]->first("strong")->text, "DCGAN");
}

TEST(MarkdownHtml, OrderedAndBulletListsNestBothWaysAndSeveralLevelsDeep) {
  const XmlElement body = render(
      "1. first\n"
      "   - a\n"
      "     1. deep\n"
      "   - b\n"
      "2. second\n");
  const auto ol = children_named(body, "ol");
  ASSERT_EQ(ol.size(), 1u);
  const auto items = children_named(*ol[0], "li");
  ASSERT_EQ(items.size(), 2u);
  const auto ul = children_named(*items[0], "ul");
  ASSERT_EQ(ul.size(), 1u);
  const auto bullets = children_named(*ul[0], "li");
  ASSERT_EQ(bullets.size(), 2u);
  const auto deepest = children_named(*bullets[0], "ol");
  ASSERT_EQ(deepest.size(), 1u);
  EXPECT_EQ(own_text(*children_named(*deepest[0], "li")[0]), "deep");
  EXPECT_EQ(own_text(*bullets[1]), "b");
  EXPECT_EQ(own_text(*items[1]), "second");
  EXPECT_TRUE(children_named(body, "ul").empty());  // no list escapes to the top level
}

TEST(MarkdownHtml, AnEscapedPipeIsOneCellShowingAPipe) {
  const XmlElement body = render(
      "| gradients | largest \\|value\\| | note |\n"
      "|---|---:|---|\n"
      "| CNN | a \\| b | `x \\| y` |\n");
  const XmlElement* table = body.first("table");
  ASSERT_NE(table, nullptr);
  const auto header = descendants(*table, "th");
  ASSERT_EQ(header.size(), 3u);
  EXPECT_EQ(header[1]->text, "largest |value|");
  const auto cells = descendants(*table, "td");
  ASSERT_EQ(cells.size(), 3u);
  EXPECT_EQ(cells[1]->text, "a | b");
  EXPECT_EQ(cells[1]->attributes.at("style"), "text-align:right");  // the column's alignment kept
  ASSERT_NE(cells[2]->first("code"), nullptr);
  EXPECT_EQ(cells[2]->first("code")->text, "x | y");
}

TEST(MarkdownHtml, ACollapsedBlockIsADetailsElementWithItsSummary) {
  const XmlElement body = render(
      "<details><summary>Full output <&></summary>\n"
      "\n"
      "```\n"
      "$ mpverify ops\n"
      "```\n"
      "</details>\n"
      "\n"
      "after\n"
      "<details><summary>left open</summary>\n");
  const auto details = children_named(body, "details");
  ASSERT_EQ(details.size(), 2u);
  ASSERT_NE(details[0]->first("summary"), nullptr);
  EXPECT_EQ(details[0]->first("summary")->text, "Full output <&>");
  ASSERT_NE(details[0]->first("pre"), nullptr);  // the code block inside it
  EXPECT_EQ(details[0]->first("pre")->first("code")->text, "$ mpverify ops\n");
  ASSERT_EQ(children_named(body, "p").size(), 1u);  // "after", outside both
  EXPECT_EQ(children_named(body, "p")[0]->text, "after");
  EXPECT_EQ(details[1]->first("summary")->text, "left open");
}

}  // namespace
