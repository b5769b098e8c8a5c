// One self-contained HTML page from the Markdown reports this project writes
// (reports/*.md): every report a section, every figure (a local .svg file the
// Markdown references as an image) inlined, no external resource (no
// script, stylesheet, font or image is fetched), so the page can be mailed or
// archived as one file.
//
// The Markdown understood is the subset the reports use:
//  - ATX headings (# .. ######), given ids "<document>-<slug>" (unique);
//  - paragraphs (consecutive lines), bullet lists ("- " or "* ") and ordered
//    lists ("1. "), a list item continued by indented lines, and lists nested
//    in an item (its items indented deeper than the item's marker);
//  - pipe tables (a header row, a |---|:--:| row, body rows; ':' aligns;
//    "\|" is a '|' inside a cell);
//  - fenced code blocks (```), shown verbatim;
//  - collapsed blocks: a line "<details><summary>TEXT</summary>" opens one,
//    a line "</details>" closes it (one left open is closed at the end);
//  - inline: `code`, **strong**, *emphasis*, [links](target) (a link to
//    another report in the set, "name.md", becomes a link to its section),
//    and images ![alt](file.svg), replaced by the SVG file's content.
// Anything else is shown as text, escaped. An image that is not a local .svg
// file (a URL, another type, a missing file) is refused: the page would not
// be self-contained. The output depends only on the files (no clock).
//
// What a reports folder holds is not trusted, since the page is opened in a
// browser: only links report/link_policy.h allows become links (the others
// stay text, as written); an image must lie inside the folder of its report,
// symlinks resolved (another is refused like a missing one); an SVG figure is
// inlined as report/svg_sanitize.h writes it again, and one it refuses is
// left out, a note on the page naming the file and why.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::report {

// Image reference (target, alt text) -> the markup put in its place.
using ImageInliner = std::function<std::string(const std::string& target, const std::string& alt)>;
// Whether a link target becomes a link (otherwise the link is shown as the
// Markdown text it was written as).
using LinkFilter = std::function<bool(const std::string& target)>;

// One document's body as an HTML fragment; `document` names it (heading ids,
// links between documents use it); `documents`: the names of the set, for
// rewriting "name.md" links. Without `links`, link_allowed(target, {}) decides
// (relative paths checked by their text alone).
std::string markdown_to_html(std::string_view markdown, const std::string& document,
                             const std::vector<std::string>& documents, const ImageInliner& image,
                             const LinkFilter& links = {});

// The page: a title, a table of contents (each document's first heading) and
// one <section id="doc-<stem>"> per file, in the order given. Images and
// relative links are resolved against each file's directory, which they must
// not leave. Throws std::runtime_error naming the file and the image for an
// image that is not a local .svg file, is missing or lies outside that
// directory, or a file that cannot be read. A figure report/svg_sanitize.h
// refuses is left out with a note on the page; when `left_out` is given, one
// line per such figure is appended to it ("FILE: image 'TARGET' left out:
// REASON").
std::string html_page(const std::string& title, const std::vector<std::filesystem::path>& markdown_files,
                      std::vector<std::string>* left_out = nullptr);

// The reports of a directory in page order: those named in `first` (file
// names, in that order, when present) and then every other *.md file sorted
// by name.
std::vector<std::filesystem::path> report_files(const std::filesystem::path& directory,
                                                const std::vector<std::string>& first);

}  // namespace mpverify::report
