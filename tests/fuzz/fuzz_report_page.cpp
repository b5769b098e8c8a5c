// report-page's sanitiser (report/svg_sanitize.h, report/link_policy.h) and the page it writes
// (report::html_page). Input cut at NUL bytes: a report's Markdown (report.md), a figure (figure.svg, which the
// Markdown may reference as ![f](figure.svg)), then a link target. Beyond the documented refusals
// (SvgRefused, std::runtime_error for an image html_page cannot inline) a finding is also output that breaks
// the promises of docs/security.md: a page or a sanitised figure holding a script element, an event
// attribute, foreignObject or a javascript: URL; a sanitised figure that sanitises to something else again;
// a link kind of "web" or "relative" for a target that spells a script scheme.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "report/html_page.h"
#include "report/link_policy.h"
#include "report/svg_sanitize.h"

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// A URL as a browser reads its scheme: spaces and control characters dropped, letters folded.
bool scheme_is_dangerous(std::string_view url) {
  std::string squeezed;
  for (const char c : url)
    if (static_cast<unsigned char>(c) > 0x20) squeezed += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* scheme : {"javascript:", "vbscript:", "data:text", "data:application", "data:image/svg", "file:"})
    if (squeezed.starts_with(scheme)) return true;
  return false;
}

[[noreturn]] void broken(const std::string& what, std::string_view output) {
  std::cerr << "fuzz_report_page: " << what << " in:\n" << output.substr(0, 2000) << "\n";
  std::abort();
}

// The attributes whose value is a URL a browser follows or fetches (a paint such as fill="data:..." is not one:
// only url(...) inside a value is, checked apart).
bool takes_url(const std::string& name) {
  for (const char* a : {"href", "xlink:href", "src", "action", "formaction", "background", "poster", "data", "xml:base"})
    if (name == a) return true;
  return false;
}

// One tag's attribute names and values, the quotes respected (text between tags is escaped by the page, so
// only markup can hold what is checked).
struct Tag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
};

Tag parse_tag(std::string_view tag) {  // tag: "<name a=\"v\" b='w' c=d ...>" in lower case
  Tag t;
  std::size_t i = 1;
  while (i < tag.size() && !std::isspace(static_cast<unsigned char>(tag[i])) && tag[i] != '>') t.name += tag[i++];
  while (i < tag.size()) {
    while (i < tag.size() && (std::isspace(static_cast<unsigned char>(tag[i])) || tag[i] == '/')) ++i;
    std::string name, value;
    while (i < tag.size() && !std::isspace(static_cast<unsigned char>(tag[i])) && tag[i] != '=' && tag[i] != '>')
      name += tag[i++];
    if (i < tag.size() && tag[i] == '=') {
      ++i;
      const char quote = i < tag.size() && (tag[i] == '"' || tag[i] == '\'') ? tag[i++] : ' ';
      while (i < tag.size() && tag[i] != quote && !(quote == ' ' && tag[i] == '>')) value += tag[i++];
      ++i;
    }
    if (!name.empty()) t.attributes.emplace_back(name, value);
    if (name.empty() && (i >= tag.size() || tag[i] == '>')) break;
  }
  return t;
}

// Markup that must never reach a page: what runs script or fetches when the page opens.
void check_no_script(std::string_view output, const char* where) {
  const std::string text = lower(output);
  for (std::size_t open = text.find('<'); open != std::string::npos; open = text.find('<', open + 1)) {
    std::size_t close = open + 1;
    for (char quote = 0; close < text.size() && (quote || text[close] != '>'); ++close)
      if (text[close] == '"' || text[close] == '\'') quote = quote == text[close] ? 0 : quote ? quote : text[close];
    const Tag tag = parse_tag(std::string_view(text).substr(open, close - open + 1));
    for (const char* banned : {"script", "foreignobject", "iframe", "object", "embed"})
      if (tag.name == banned) broken(std::string(where) + " holds <" + banned + ">", output);
    for (const auto& [name, value] : tag.attributes) {
      if (name.starts_with("on")) broken(std::string(where) + " holds the event attribute " + name, output);
      if (takes_url(name) && scheme_is_dangerous(value))
        broken(std::string(where) + " holds a script, document or file URL in " + name, output);
      if (takes_url(name)) continue;  // its whole value is the URL, checked above; "url(" in it is a path
      for (std::size_t at = value.find("url("); at != std::string::npos; at = value.find("url(", at + 4)) {
        std::string inside = value.substr(at + 4, value.find(')', at) - at - 4);
        std::erase_if(inside, [](char c) { return c == '"' || c == '\''; });
        if (scheme_is_dangerous(inside)) broken(std::string(where) + " holds url(" + inside + ") in " + name, output);
      }
    }
    open = close;
  }
}

void check_figure(std::string_view svg) {
  std::string once;
  try {
    once = mpverify::report::sanitize_svg(svg);
  } catch (const mpverify::report::SvgRefused&) {
    return;
  }
  check_no_script(once, "a sanitised figure");
  try {
    if (mpverify::report::sanitize_svg(once) != once) broken("sanitising twice changed the figure", once);
  } catch (const mpverify::report::SvgRefused& e) {
    broken(std::string("its own output refused: ") + e.what(), once);
  }
}

void check_link(std::string_view target) {
  const auto kind = mpverify::report::link_kind(target);
  if ((kind == mpverify::report::LinkKind::web || kind == mpverify::report::LinkKind::relative) &&
      scheme_is_dangerous(target))
    broken("a script, document or file URL is a link", target);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto parts = fuzz::parts_of(fuzz::text_of(data, size));
  if (parts.size() > 1) check_figure(parts[1]);
  if (parts.size() > 2) check_link(parts[2]);
  const auto& dir = fuzz::scratch().fresh();
  fuzz::write_file(dir / "report.md", parts[0]);
  if (parts.size() > 1) fuzz::write_file(dir / "figure.svg", parts[1]);
  std::string page;
  try {
    std::vector<std::string> left_out;
    page = report::html_page("fuzz", {dir / "report.md"}, &left_out);
  } catch (const std::runtime_error&) {
    return 0;
  }
  check_no_script(page, "the page");
  return 0;
}
