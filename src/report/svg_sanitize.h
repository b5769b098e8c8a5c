// The SVG figures the reports page (report/html_page.h) inlines, cut down to
// drawing. Inline SVG in an HTML page is live markup: an event attribute, a
// <script>, a <foreignObject> holding HTML, an external reference or markup
// after </svg> would run or fetch when the page is opened. A figure is
// therefore parsed by a strict XML reader and written again from what was
// parsed, every element and attribute checked against an allowlist; a figure
// that holds anything else is refused as a whole (with the reason), since a
// figure with parts silently dropped could show something other than what its
// writer drew.
//
// Allowed: the elements and attributes the figure writers emit
// (report/svg_*.h) and common drawing ones (shapes, paths, text, gradients,
// clip paths, masks, markers, patterns, symbols, <use>); references only to
// "#id" inside the page (href, xlink:href, url(#id) in presentation
// attributes and style), and in <image> only a base64 PNG, JPEG, GIF or WebP
// data: URI (how report/svg_image_grid.h embeds its panels). Refused: any other
// element (script, style, foreignObject, a, animate, set, ...), any other
// attribute (on* event attributes included), a DOCTYPE, a processing
// instruction other than the XML declaration, CDATA sections, entities other
// than XML's five and character references, backslashes in attribute values
// (CSS escapes could hide "url("), and anything but whitespace or comments
// after the root element.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace mpverify::report {

// Why a figure was refused; what() reads after "left out: ", e.g.
// "it contains <script>".
class SvgRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The figure's root <svg> element, written again from its parse (attribute
// values double-quoted and escaped, text escaped, comments and the XML
// declaration dropped). Throws SvgRefused for what the rules above refuse or
// for text that is not well-formed XML.
std::string sanitize_svg(std::string_view text);

}  // namespace mpverify::report
