// A small, strict XML reader for tests: it checks well-formedness (one root
// element, matching start/end tags, quoted attribute values without a raw '<'
// or a bare '&', known entities and numeric character references only, no
// duplicate attribute) and returns the element tree with unescaped attribute
// values and text, so that a test can check a report's structure rather than
// compare strings. Comments, processing instructions and the XML declaration
// are skipped; DOCTYPE and CDATA are not supported (rejected).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpverify::test {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::vector<XmlElement> children;
  std::string text;  // the character data directly inside, concatenated

  std::vector<const XmlElement*> all(const std::string& child) const {
    std::vector<const XmlElement*> found;
    for (const XmlElement& c : children)
      if (c.name == child) found.push_back(&c);
    return found;
  }
  const XmlElement* first(const std::string& child) const {
    for (const XmlElement& c : children)
      if (c.name == child) return &c;
    return nullptr;
  }
  bool has(const std::string& attribute) const { return attributes.count(attribute) != 0; }
};

class XmlReader {
 public:
  explicit XmlReader(std::string text) : s_(std::move(text)) {}

  // Throws std::runtime_error with the byte offset on malformed XML.
  XmlElement parse() {
    skip_misc();
    if (!at("<")) fail("expected the root element");
    XmlElement root = element();
    skip_misc();
    if (i_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("XML: " + what + " at byte " + std::to_string(i_));
  }
  bool at(const char* t) const { return s_.compare(i_, std::char_traits<char>::length(t), t) == 0; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void skip_misc() {
    for (;;) {
      skip_space();
      if (at("<?")) {
        const auto end = s_.find("?>", i_);
        if (end == std::string::npos) fail("unterminated processing instruction");
        i_ = end + 2;
      } else if (at("<!--")) {
        const auto end = s_.find("-->", i_);
        if (end == std::string::npos) fail("unterminated comment");
        i_ = end + 3;
      } else {
        return;
      }
    }
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':' ||
           static_cast<unsigned char>(c) >= 0x80;
  }
  std::string name() {
    const std::size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == start) fail("expected a name");
    return s_.substr(start, i_ - start);
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  // At '&': the entity's text.
  void entity(std::string& out) {
    const auto end = s_.find(';', i_);
    if (end == std::string::npos || end - i_ > 12) fail("a bare '&'");
    const std::string e = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    if (e == "amp") out += '&';
    else if (e == "lt") out += '<';
    else if (e == "gt") out += '>';
    else if (e == "quot") out += '"';
    else if (e == "apos") out += '\'';
    else if (e.size() > 1 && e[0] == '#') {
      const bool hex = e[1] == 'x';
      const std::string digits = e.substr(hex ? 2 : 1);
      if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") != std::string::npos)
        fail("a malformed character reference");
      const auto cp = static_cast<std::uint32_t>(std::stoul(digits, nullptr, hex ? 16 : 10));
      // XML 1.0's Char production: tab, LF, CR, and from 0x20 on.
      if (cp < 0x20 && cp != 0x9 && cp != 0xA && cp != 0xD) fail("a character reference to a forbidden character");
      append_utf8(out, cp);
    } else {
      fail("an unknown entity &" + e + ";");
    }
  }
  static void check_char(char c, const XmlReader& r) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') r.fail("a control character XML forbids");
  }
  XmlElement element() {
    ++i_;  // '<'
    XmlElement e;
    e.name = name();
    for (;;) {
      skip_space();
      if (at("/>")) {
        i_ += 2;
        return e;
      }
      if (at(">")) {
        ++i_;
        break;
      }
      const std::string key = name();
      skip_space();
      if (!at("=")) fail("expected '=' after attribute " + key);
      ++i_;
      skip_space();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) fail("an unquoted attribute value");
      const char quote = s_[i_++];
      std::string value;
      while (i_ < s_.size() && s_[i_] != quote) {
        if (s_[i_] == '<') fail("a raw '<' in an attribute value");
        if (s_[i_] == '&') {
          entity(value);
          continue;
        }
        check_char(s_[i_], *this);
        value += s_[i_++];
      }
      if (i_ >= s_.size()) fail("an unterminated attribute value");
      ++i_;
      if (!e.attributes.emplace(key, value).second) fail("a duplicate attribute " + key);
    }
    for (;;) {
      if (i_ >= s_.size()) fail("element <" + e.name + "> is not closed");
      if (at("</")) {
        i_ += 2;
        const std::string closing = name();
        if (closing != e.name) fail("</" + closing + "> closes <" + e.name + ">");
        skip_space();
        if (!at(">")) fail("expected '>'");
        ++i_;
        return e;
      }
      if (at("<!--")) {
        const auto end = s_.find("-->", i_);
        if (end == std::string::npos) fail("unterminated comment");
        i_ = end + 3;
      } else if (at("<!") || at("<?")) {
        fail("CDATA, DOCTYPE or a processing instruction inside an element (not supported)");
      } else if (at("<")) {
        e.children.push_back(element());
      } else if (at("&")) {
        entity(e.text);
      } else {
        check_char(s_[i_], *this);
        e.text += s_[i_++];
      }
    }
  }

  std::string s_;
  std::size_t i_ = 0;
};

inline XmlElement parse_xml(std::string text) { return XmlReader(std::move(text)).parse(); }

}  // namespace mpverify::test
