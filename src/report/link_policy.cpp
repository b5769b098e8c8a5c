#include "report/link_policy.h"

#include <cctype>
#include <string>
#include <system_error>

namespace mpverify::report {

namespace fs = std::filesystem;

namespace {

// Named, not only anonymous: the library compiles in unity batches, where
// another file's helpers share this translation unit.
namespace link_rules {

bool alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// "&#..." or "&name;": once the page's HTML is decoded, a character reference
// could spell a scheme's letters or its colon.
bool has_character_reference(std::string_view t) {
  for (std::size_t k = t.find('&'); k != std::string_view::npos; k = t.find('&', k + 1)) {
    if (k + 1 < t.size() && t[k + 1] == '#') return true;
    std::size_t e = k + 1;
    while (e < t.size() && std::isalnum(static_cast<unsigned char>(t[e]))) ++e;
    if (e > k + 1 && e < t.size() && t[e] == ';') return true;
  }
  return false;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The file part of a relative target (before '?' or '#'), %XX decoded: a
// browser reads "%2e%2e" as "..".
std::string file_part(std::string_view target) {
  const std::string_view raw = target.substr(0, target.find_first_of("?#"));
  std::string out;
  for (std::size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] == '%' && k + 2 < raw.size() && hex_digit(raw[k + 1]) >= 0 && hex_digit(raw[k + 2]) >= 0) {
      out += static_cast<char>(hex_digit(raw[k + 1]) * 16 + hex_digit(raw[k + 2]));
      k += 2;
    } else {
      out += raw[k];
    }
  }
  return out;
}

}  // namespace link_rules

}  // namespace

LinkKind link_kind(std::string_view target) {
  if (target.empty()) return LinkKind::refused;
  for (const char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F || c == '\\') return LinkKind::refused;
  }
  if (link_rules::has_character_reference(target)) return LinkKind::refused;
  if (target.front() == '#') return LinkKind::fragment;
  if (target.front() == '/') return LinkKind::refused;  // an absolute path, or "//host"
  const std::size_t colon = target.find(':');
  if (colon == std::string_view::npos || colon > target.find_first_of("/?#")) return LinkKind::relative;
  std::string scheme(target.substr(0, colon));
  for (char& c : scheme) {
    if (!link_rules::alpha(c)) return LinkKind::refused;
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  const std::string_view rest = target.substr(colon + 1);
  const bool has_host = rest.size() > 2 && rest.substr(0, 2) == "//" && rest.find_first_of("/?#", 2) != 2;
  return (scheme == "http" || scheme == "https") && has_host ? LinkKind::web : LinkKind::refused;
}

bool lies_inside(const fs::path& path, const fs::path& folder) {
  std::error_code e1, e2;
  const fs::path p = fs::weakly_canonical(path, e1), f = fs::weakly_canonical(folder, e2);
  if (e1 || e2 || p.empty() || f.empty()) return false;
  const fs::path rel = p.lexically_relative(f);
  return !rel.empty() && *rel.begin() != "..";
}

bool link_allowed(std::string_view target, const fs::path& folder) {
  switch (link_kind(target)) {
    case LinkKind::fragment:
    case LinkKind::web:
      return true;
    case LinkKind::refused:
      return false;
    case LinkKind::relative:
      break;
  }
  const std::string file = link_rules::file_part(target);
  if (file.empty()) return true;  // "?query": the page itself
  if (file.find('\0') != std::string::npos || file.find('\\') != std::string::npos || file.front() == '/')
    return false;
  if (folder.empty()) {
    const fs::path normal = fs::path(file).lexically_normal();
    return normal.empty() || *normal.begin() != "..";
  }
  return lies_inside(folder / file, folder);
}

}  // namespace mpverify::report
