// What the reports page (report/html_page.h) may point at. The page is opened
// from disk or from a mail: a link must not run code (javascript:,
// vbscript:, a data: document), open the reader's files (file:, an absolute
// path, a relative path that climbs out of the reports folder) or lead to
// another host by a scheme-less "//host"; a figure must come from the reports
// folder. Browsers forgive a lot in a URL's scheme (letter case, tabs and
// newlines inside it, leading spaces, character references once the page's
// HTML is decoded), so the rule names what is allowed, from the target's
// exact text, and everything else is refused.
#pragma once

#include <filesystem>
#include <string_view>

namespace mpverify::report {

enum class LinkKind {
  fragment,  // "#..."
  web,       // "http://host..." or "https://host..." (any letter case)
  relative,  // a path without a scheme, not absolute, not "//host"
  refused,   // anything else
};

// The kind of a Markdown link target by its text alone. Refused besides other
// schemes: any whitespace or control character, a backslash (browsers read it
// as '/'), an '&' that starts a character reference ("&#...", "&name;"), an
// empty target, and a ':' before the first '/', '?' or '#' that does not
// begin "http://" or "https://" followed by a host.
LinkKind link_kind(std::string_view target);

// Whether `path` lies inside `folder` (itself included) once both are
// resolved (std::filesystem::weakly_canonical: "..", "." and symlinks of the
// existing part); false when either cannot be resolved.
bool lies_inside(const std::filesystem::path& path, const std::filesystem::path& folder);

// Whether the page makes `target` a link: a fragment, a web URL, or a
// relative path whose file part (before '?' or '#', percent-decoded as a
// browser does before it removes "..") stays inside `folder` when taken from
// it. An empty `folder` checks the path by its text alone ("a/../b" stays,
// "../b" leaves).
bool link_allowed(std::string_view target, const std::filesystem::path& folder);

}  // namespace mpverify::report
