#include "report/svg_sanitize.h"

#include "report/xml_escape.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <cctype>
#include <cstdint>
#include <utility>
#include <vector>

namespace mpverify::report {

namespace {

// Named, not only anonymous: the library compiles in unity batches, where
// another file's helpers share this translation unit.
namespace svg_allow {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

constexpr std::string_view kElements[]{
    "svg",    "g",      "path",     "rect",  "circle", "ellipse", "line", "polyline", "polygon", "text",  "tspan",
    "title",  "desc",   "defs",     "clipPath", "mask", "marker", "pattern", "symbol", "use",    "image", "stop",
    "linearGradient", "radialGradient"};

// Presentation properties: allowed as attributes and inside style="...".
constexpr std::string_view kProperties[]{
    "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-opacity", "stroke-dasharray",
    "stroke-dashoffset", "stroke-linecap", "stroke-linejoin", "stroke-miterlimit", "opacity", "color", "display",
    "visibility", "overflow", "clip-path", "clip-rule", "mask", "marker-start", "marker-mid", "marker-end",
    "font-family", "font-size", "font-weight", "font-style", "font-variant", "font-stretch", "text-anchor",
    "dominant-baseline", "alignment-baseline", "baseline-shift", "letter-spacing", "word-spacing",
    "text-decoration", "writing-mode", "paint-order", "vector-effect", "shape-rendering", "text-rendering",
    "image-rendering"};

// Geometry, structure and the remaining attributes of the allowed elements.
constexpr std::string_view kAttributes[]{
    "id", "class", "style", "transform", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry", "fx", "fy",
    "fr", "width", "height", "d", "points", "pathLength", "viewBox", "preserveAspectRatio", "version", "xmlns",
    "xmlns:xlink", "xml:space", "xml:lang", "lang", "href", "xlink:href", "role", "aria-label", "aria-hidden",
    "dx", "dy", "rotate", "textLength", "lengthAdjust", "offset", "stop-color", "stop-opacity", "gradientUnits",
    "gradientTransform", "spreadMethod", "clipPathUnits", "maskUnits", "maskContentUnits", "markerWidth",
    "markerHeight", "refX", "refY", "orient", "markerUnits", "patternUnits", "patternContentUnits",
    "patternTransform", "color-rendering"};

template <std::size_t N>
bool listed(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}
bool element_allowed(std::string_view name) { return listed(kElements, name); }
bool attribute_allowed(std::string_view name) { return listed(kProperties, name) || listed(kAttributes, name); }

// The CSS functions a style may call: colours, and url() (checked apart).
bool style_functions_allowed(std::string_view value) {
  const std::string l = lower(value);
  for (std::size_t open = l.find('('); open != std::string::npos; open = l.find('(', open + 1)) {
    std::size_t start = open;
    while (start > 0 && (std::isalpha(static_cast<unsigned char>(l[start - 1])) || l[start - 1] == '-')) --start;
    const std::string_view function = std::string_view(l).substr(start, open - start);
    if (function != "url" && function != "rgb" && function != "rgba" && function != "hsl" && function != "hsla")
      return false;
  }
  return true;
}

// A name from the figure as the reasons quote it: name characters only (a
// reason goes to the terminal and onto the page), at most 40.
std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 40))
    if (is_id_char(c)) out += c;
  return out;
}

// "#id": a reference to an element of the page itself.
bool local_reference(std::string_view v) {
  v = trim(v);
  return v.size() > 1 && v.front() == '#' && std::all_of(v.begin() + 1, v.end(), is_id_char);
}

// A raster image carried inside the figure (no fetch, no script: an SVG or
// HTML data: URI is a document, and is refused).
bool embedded_raster(std::string_view v) {
  const std::string l = lower(trim(v));
  for (const std::string_view type : {"png", "jpeg", "gif", "webp"}) {
    const std::string prefix = "data:image/" + std::string(type) + ";base64,";
    if (l.rfind(prefix, 0) != 0) continue;
    return std::all_of(l.begin() + static_cast<std::ptrdiff_t>(prefix.size()), l.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=' || is_space(c);
    });
  }
  return false;
}

// Every url(...) in a presentation value names "#id" (a gradient, clip path,
// mask or marker of the page), never a file or host.
bool urls_local(std::string_view value) {
  const std::string l = lower(value);
  for (std::size_t at = l.find("url("); at != std::string::npos; at = l.find("url(", at + 4)) {
    const std::size_t close = l.find(')', at);
    if (close == std::string::npos) return false;
    std::string_view inside = trim(std::string_view(l).substr(at + 4, close - at - 4));
    if (inside.size() >= 2 && (inside.front() == '\'' || inside.front() == '"') && inside.back() == inside.front())
      inside = trim(inside.substr(1, inside.size() - 2));
    if (!local_reference(inside)) return false;
  }
  return true;
}

}  // namespace svg_allow

// The reader: a strict XML subset, read once from the start; what it writes
// comes only from what it parsed.
class SvgReader {
 public:
  explicit SvgReader(std::string_view s) : s_(s) {}

  std::string run() {
    if (s_.size() > kMaxBytes) throw SvgRefused("it is larger than 64 MiB");
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") i_ = 3;  // a UTF-8 byte order mark
    prolog();
    if (!at("<") || at("</")) malformed("expected the <svg> element");
    start_tag(true);
    content();
    epilog();
    return std::move(out_);
  }

 private:
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 20, kMaxDepth = 64;

  [[noreturn]] void malformed(const std::string& what) const {
    const std::string_view read = s_.substr(0, std::min(i_, s_.size()));
    const auto line = 1 + std::count(read.begin(), read.end(), '\n');
    throw SvgRefused("it is not well-formed XML (" + what + ", line " + std::to_string(line) + ")");
  }
  bool at(std::string_view t) const { return s_.substr(i_, t.size()) == t; }
  void skip_space() {
    while (i_ < s_.size() && svg_allow::is_space(s_[i_])) ++i_;
  }
  void expect(std::string_view t) {
    if (!at(t)) malformed("expected '" + std::string(t) + "'");
    i_ += t.size();
  }
  std::string name() {
    const std::size_t start = i_;
    const auto first = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
    if (i_ < s_.size() && first(s_[i_]))
      while (i_ < s_.size() && (svg_allow::is_id_char(s_[i_]))) ++i_;
    if (i_ == start) malformed("expected a name");
    return std::string(s_.substr(start, i_ - start));
  }

  // Before the root: the XML declaration (first, once), comments, whitespace.
  void prolog() {
    if (at("<?xml") && i_ + 5 < s_.size() && (svg_allow::is_space(s_[i_ + 5]) || s_[i_ + 5] == '?')) {
      const std::size_t end = s_.find("?>", i_);
      if (end == std::string_view::npos) malformed("unterminated XML declaration");
      i_ = end + 2;
    }
    for (;;) {
      skip_space();
      if (at("<!--")) {
        comment();
      } else if (at("<?")) {
        processing_instruction();
      } else if (at("<!")) {
        declaration();
      } else {
        return;
      }
    }
  }
  // After the root: whitespace and comments only.
  void epilog() {
    for (;;) {
      skip_space();
      if (!at("<!--")) break;
      comment();
    }
    if (i_ != s_.size()) throw SvgRefused("it has content after </svg>");
  }
  void comment() {
    const std::size_t end = s_.find("-->", i_ + 4);
    if (end == std::string_view::npos) malformed("unterminated comment");
    i_ = end + 3;
  }
  [[noreturn]] void processing_instruction() {
    i_ += 2;
    const std::size_t start = i_;
    while (i_ < s_.size() && !svg_allow::is_space(s_[i_]) && s_[i_] != '?' && s_[i_] != '>') ++i_;
    throw SvgRefused("it has a processing instruction (" + svg_allow::printable(s_.substr(start, i_ - start)) + ")");
  }
  [[noreturn]] void declaration() const {
    if (at("<![CDATA[")) throw SvgRefused("it has a CDATA section");
    if (svg_allow::lower(s_.substr(i_, 9)) == "<!doctype") throw SvgRefused("it has a DOCTYPE declaration");
    throw SvgRefused("it has a markup declaration (<!...)");
  }

  // The elements under the root, kept on a stack (no recursion: a deep
  // figure cannot exhaust the call stack).
  void content() {
    while (!open_.empty()) {
      if (i_ >= s_.size()) malformed("<" + open_.back() + "> is not closed");
      if (at("</")) {
        end_tag();
      } else if (at("<!--")) {
        comment();
      } else if (at("<?")) {
        processing_instruction();
      } else if (at("<!")) {
        declaration();
      } else if (at("<")) {
        start_tag(false);
      } else {
        text();
      }
    }
  }
  void end_tag() {
    i_ += 2;
    const std::string n = name();
    skip_space();
    expect(">");
    if (n != open_.back()) malformed("</" + n + "> closes <" + open_.back() + ">");
    out_ += "</" + n + ">";
    open_.pop_back();
  }
  void text() {
    const std::size_t end = std::min(s_.find('<', i_), s_.size());
    const std::string decoded = unescape(s_.substr(i_, end - i_));
    i_ = end;
    out_ += xml_escape(decoded);
  }

  void start_tag(bool root);
  void check_attributes(const std::string& element,
                        const std::vector<std::pair<std::string, std::string>>& attributes) const;
  static void check_value(const std::string& element, const std::string& attribute, const std::string& value);
  static void check_style(const std::string& value, const std::string& where);
  std::string unescape(std::string_view raw) const;
  std::string reference(std::string_view entity) const;

  std::string_view s_;
  std::size_t i_ = 0;
  std::string out_;
  std::vector<std::string> open_;
};

// A start tag: the element and its attributes checked, then written again.
void SvgReader::start_tag(bool root) {
  ++i_;
  const std::string element = name();
  if (root && element != "svg") throw SvgRefused("its root element is <" + element + ">, not <svg>");
  if (!svg_allow::element_allowed(element)) throw SvgRefused("it contains <" + element + ">");
  // <title> and <desc> are where an HTML parser reads HTML again inside SVG:
  // they hold text only.
  if (!open_.empty() && (open_.back() == "title" || open_.back() == "desc"))
    throw SvgRefused("it has an element inside <" + open_.back() + ">");
  if (open_.size() >= kMaxDepth) throw SvgRefused("it nests elements more than 64 deep");
  std::vector<std::pair<std::string, std::string>> attributes;
  for (;;) {
    const bool spaced = i_ < s_.size() && svg_allow::is_space(s_[i_]);
    skip_space();
    if (at("/>") || at(">")) break;
    if (!spaced) malformed("expected a space before an attribute of <" + element + ">");
    std::string attribute = name();
    skip_space();
    expect("=");
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) malformed("attribute " + attribute + " is not quoted");
    const char quote = s_[i_++];
    const std::size_t end = s_.find(quote, i_);
    if (end == std::string_view::npos) malformed("attribute " + attribute + " is not closed");
    const std::string_view raw = s_.substr(i_, end - i_);
    if (raw.find('<') != std::string_view::npos) malformed("'<' in attribute " + attribute);
    i_ = end + 1;
    for (const auto& a : attributes)
      if (a.first == attribute) malformed("attribute " + attribute + " given twice");
    attributes.emplace_back(std::move(attribute), unescape(raw));
  }
  check_attributes(element, attributes);
  out_ += "<" + element;
  for (const auto& [attribute, value] : attributes) out_ += " " + attribute + "=\"" + xml_escape(value, true) + "\"";
  if (at("/>")) {
    i_ += 2;
    out_ += "/>";
  } else {
    ++i_;
    out_ += ">";
    open_.push_back(element);
  }
}

// Names first, so that an event attribute is named as such wherever it
// stands; then each value.
void SvgReader::check_attributes(const std::string& element,
                                 const std::vector<std::pair<std::string, std::string>>& attributes) const {
  for (const auto& [attribute, value] : attributes) {
    if (svg_allow::lower(attribute).rfind("on", 0) == 0)
      throw SvgRefused("it has the event attribute " + attribute + " on <" + element + ">");
    if (!svg_allow::attribute_allowed(attribute))
      throw SvgRefused("it has the attribute " + attribute + " on <" + element + ">");
  }
  for (const auto& [attribute, value] : attributes) check_value(element, attribute, value);
}

void SvgReader::check_value(const std::string& element, const std::string& attribute, const std::string& value) {
  const std::string where = attribute + " on <" + element + ">";
  const std::string outside = "it refers to something outside the figure (";
  if (attribute == "xmlns" && value != "http://www.w3.org/2000/svg")
    throw SvgRefused("it declares another namespace (" + where + ")");
  if (attribute == "xmlns:xlink" && value != "http://www.w3.org/1999/xlink")
    throw SvgRefused("it declares another namespace (" + where + ")");
  if (attribute == "href" || attribute == "xlink:href") {
    const bool ok = element == "image" ? svg_allow::embedded_raster(value) : svg_allow::local_reference(value);
    if (!ok) throw SvgRefused(outside + where + ")");
    return;
  }
  if (attribute == "xmlns" || attribute == "xmlns:xlink") return;
  // CSS reads escapes ("u\72l(") in presentation values and style.
  if (value.find('\\') != std::string::npos) throw SvgRefused("it has a backslash in " + where);
  if (!svg_allow::urls_local(value)) throw SvgRefused(outside + "url() in " + where + ")");
  if (attribute == "style") check_style(value, where);
}

// A style of presentation properties only ("fill: #4477aa; stroke-width: 2"),
// calling no CSS function but colours and url(#id); no at-rule, no other
// property (behavior, -moz-binding, position, ...).
void SvgReader::check_style(const std::string& value, const std::string& where) {
  const SvgRefused refused("it has a style other than presentation properties (" + where + ")");
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t end = std::min(value.find(';', start), value.size());
    const std::string_view declaration = svg_allow::trim(std::string_view(value).substr(start, end - start));
    start = end + 1;
    if (declaration.empty()) continue;
    const std::size_t colon = declaration.find(':');
    if (colon == std::string_view::npos) throw refused;
    if (!svg_allow::listed(svg_allow::kProperties, svg_allow::lower(svg_allow::trim(declaration.substr(0, colon)))))
      throw refused;
    const std::string_view v = declaration.substr(colon + 1);
    const bool plain = std::all_of(v.begin(), v.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || svg_allow::is_space(c) ||
             std::string_view("#%.,()+-_'\"").find(c) != std::string_view::npos;
    });
    if (!plain || !svg_allow::style_functions_allowed(v)) throw refused;
  }
}

// Character data or an attribute value with XML's five entities and
// character references replaced; any other entity is refused (without a
// DOCTYPE there is none to define it).
std::string SvgReader::unescape(std::string_view raw) const {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] != '&') {
      out += raw[k];
      continue;
    }
    const std::size_t semicolon = raw.find(';', k);
    if (semicolon == std::string_view::npos || semicolon - k > 12) malformed("'&' that starts no entity");
    out += reference(raw.substr(k + 1, semicolon - k - 1));
    k = semicolon;
  }
  return out;
}

std::string SvgReader::reference(std::string_view entity) const {
  static const std::array<std::pair<std::string_view, std::string_view>, 5> kNamed{
      {{"lt", "<"}, {"gt", ">"}, {"amp", "&"}, {"quot", "\""}, {"apos", "'"}}};
  for (const auto& [n, c] : kNamed)
    if (entity == n) return std::string(c);
  if (entity.size() < 2 || entity.front() != '#')
    throw SvgRefused("it uses the entity &" + svg_allow::printable(entity) + ";");
  const bool hex = entity[1] == 'x';
  const std::string_view digits = entity.substr(hex ? 2 : 1);
  std::uint32_t cp = 0;
  for (const char c : digits) {
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                  : hex && std::isxdigit(static_cast<unsigned char>(c)) ? std::tolower(c) - 'a' + 10
                                                                         : -1;
    if (d < 0 || cp > 0x10FFFF) malformed("bad character reference");
    cp = cp * (hex ? 16u : 10u) + static_cast<std::uint32_t>(d);
  }
  const bool xml_char = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                        (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
  if (digits.empty() || !xml_char) malformed("bad character reference");
  std::string utf8;
  if (cp < 0x80) {
    utf8 += static_cast<char>(cp);
  } else if (cp < 0x800) {
    utf8 += static_cast<char>(0xC0 | (cp >> 6));
    utf8 += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    utf8 += static_cast<char>(0xE0 | (cp >> 12));
    utf8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    utf8 += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    utf8 += static_cast<char>(0xF0 | (cp >> 18));
    utf8 += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    utf8 += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    utf8 += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return utf8;
}

}  // namespace

std::string sanitize_svg(std::string_view text) { return SvgReader(text).run(); }

}  // namespace mpverify::report
