#include "report/html_page.h"

#include "report/link_policy.h"
#include "report/svg_sanitize.h"
#include "report/xml_escape.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace mpverify::report {

namespace fs = std::filesystem;

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A collapsed block, as GitHub shows it: "<details><summary>TEXT</summary>"
// alone on a line opens it, "</details>" alone on a line closes it.
constexpr std::string_view kDetailsOpen = "<details><summary>", kSummaryClose = "</summary>";

class Converter {
 public:
  Converter(std::string document, const std::vector<std::string>& documents, const ImageInliner& image,
            LinkFilter links)
      : document_(std::move(document)), documents_(documents), image_(image), links_(std::move(links)) {}

  std::string inline_text(std::string_view s) {
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '`') {
        const std::size_t end = s.find('`', i + 1);
        if (end != std::string_view::npos) {
          out += "<code>" + xml_escape(s.substr(i + 1, end - i - 1)) + "</code>";
          i = end + 1;
          continue;
        }
      } else if (starts_with(s.substr(i), "**")) {
        const std::size_t end = s.find("**", i + 2);
        if (end != std::string_view::npos && end > i + 2) {
          out += "<strong>" + inline_text(s.substr(i + 2, end - i - 2)) + "</strong>";
          i = end + 2;
          continue;
        }
      } else if (c == '*' && i + 1 < s.size() && s[i + 1] != ' ') {
        const std::size_t end = s.find('*', i + 1);
        if (end != std::string_view::npos && s[end - 1] != ' ') {
          out += "<em>" + inline_text(s.substr(i + 1, end - i - 1)) + "</em>";
          i = end + 1;
          continue;
        }
      } else if (c == '[' || (c == '!' && i + 1 < s.size() && s[i + 1] == '[')) {
        const bool is_image = c == '!';
        const std::size_t open = is_image ? i + 1 : i;
        const std::size_t close = s.find("](", open);
        const std::size_t end = close == std::string_view::npos ? close : s.find(')', close + 2);
        if (close != std::string_view::npos && end != std::string_view::npos) {
          const std::string label(s.substr(open + 1, close - open - 1));
          const std::string target(s.substr(close + 2, end - close - 2));
          out += is_image ? image_(target, label) : link(label, target, s.substr(i, end + 1 - i));
          i = end + 1;
          continue;
        }
      }
      out += xml_escape(s.substr(i, 1));
      ++i;
    }
    return out;
  }

  std::string convert(std::string_view markdown) {
    std::vector<std::string_view> lines;
    for (std::size_t pos = 0; pos < markdown.size();) {
      const std::size_t nl = std::min(markdown.find('\n', pos), markdown.size());
      std::string_view line = markdown.substr(pos, nl - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      lines.push_back(line);
      pos = nl + 1;
    }
    std::string out;
    std::size_t i = 0;
    const auto is_blank = [&](std::size_t k) { return trim(lines[k]).empty(); };
    while (i < lines.size()) {
      const std::string_view line = lines[i];
      const std::string_view t = trim(line);
      if (t.empty()) {
        ++i;
      } else if (starts_with(t, "```")) {
        std::string code;
        ++i;
        while (i < lines.size() && !starts_with(trim(lines[i]), "```")) {
          code += xml_escape(lines[i]);
          code += '\n';
          ++i;
        }
        ++i;  // the closing fence
        out += "<pre><code>" + code + "</code></pre>\n";
      } else if (starts_with(t, kDetailsOpen) && t.size() >= kDetailsOpen.size() + kSummaryClose.size() &&
                 t.substr(t.size() - kSummaryClose.size()) == kSummaryClose) {
        const std::string_view summary =
            t.substr(kDetailsOpen.size(), t.size() - kDetailsOpen.size() - kSummaryClose.size());
        out += "<details><summary>" + inline_text(summary) + "</summary>\n";
        ++open_details_;
        ++i;
      } else if (t == "</details>" && open_details_ > 0) {
        out += "</details>\n";
        --open_details_;
        ++i;
      } else if (heading_level(t) > 0) {
        const int level = heading_level(t);
        const std::string_view text = trim(t.substr(static_cast<std::size_t>(level)));
        const std::string id = unique_id(text);
        const std::string tag = "h" + std::to_string(level);
        out += "<" + tag + " id=\"" + id + "\">" + inline_text(text) + "</" + tag + ">\n";
        ++i;
      } else if (t.front() == '|' && i + 1 < lines.size() && is_separator(trim(lines[i + 1]))) {
        const std::vector<std::string> align = alignments(trim(lines[i + 1]));
        out += "<table>\n<thead><tr>";
        std::size_t col = 0;
        for (const std::string& cell : cells(t)) out += "<th" + align_attr(align, col++) + ">" + inline_text(cell) + "</th>";
        out += "</tr></thead>\n<tbody>\n";
        i += 2;
        while (i < lines.size() && !trim(lines[i]).empty() && trim(lines[i]).front() == '|') {
          out += "<tr>";
          col = 0;
          for (const std::string& cell : cells(trim(lines[i])))
            out += "<td" + align_attr(align, col++) + ">" + inline_text(cell) + "</td>";
          out += "</tr>\n";
          ++i;
        }
        out += "</tbody>\n</table>\n";
      } else if (list_marker(line) != 0) {
        out += list_html(lines, i, 0);
      } else if (starts_with(t, "![") && t.back() == ')' && t.find("](") != std::string_view::npos &&
                 t.find(')') == t.size() - 1) {
        out += "<figure>" + inline_text(t) + "</figure>\n";
        ++i;
      } else {
        std::string paragraph(t);
        ++i;
        while (i < lines.size() && !is_blank(i) && paragraph_continues(lines[i])) {
          paragraph += '\n';
          paragraph += trim(lines[i]);
          ++i;
        }
        out += "<p>" + inline_text(paragraph) + "</p>\n";
      }
    }
    for (; open_details_ > 0; --open_details_) out += "</details>\n";  // the page stays well-formed
    return out;
  }

 private:
  static int heading_level(std::string_view t) {
    int n = 0;
    while (n < static_cast<int>(t.size()) && t[static_cast<std::size_t>(n)] == '#') ++n;
    if (n == 0 || n > 6 || static_cast<std::size_t>(n) >= t.size() || t[static_cast<std::size_t>(n)] != ' ') return 0;
    return n;
  }
  // A list and the lists nested in its items, from lines[i], whose items
  // start `indent` columns in; i ends after the list. An item's text goes on
  // over the lines indented deeper that are not items themselves; an item
  // indented deeper starts a nested list inside the current item. A blank
  // line, a line indented less, or an item of the other kind ends the list.
  std::string list_html(const std::vector<std::string_view>& lines, std::size_t& i, std::size_t indent) {
    const int kind = list_marker(lines[i].substr(indent));
    std::string out = kind == 2 ? "<ol>\n" : "<ul>\n";
    while (i < lines.size() && indentation(lines[i]) == indent && list_marker(lines[i].substr(indent)) == kind) {
      std::string item(item_text(lines[i].substr(indent)));
      ++i;
      std::string nested;
      while (i < lines.size() && !trim(lines[i]).empty() && indentation(lines[i]) > indent) {
        const std::size_t deeper = indentation(lines[i]);
        if (list_marker(lines[i].substr(deeper)) != 0) {
          nested += list_html(lines, i, deeper);
        } else {
          item += '\n';
          item += trim(lines[i]);
          ++i;
        }
      }
      out += "<li>" + inline_text(item) + (nested.empty() ? "" : "\n" + nested) + "</li>\n";
    }
    out += kind == 2 ? "</ol>\n" : "</ul>\n";
    return out;
  }
  // The number of leading spaces (a tab counts as one column, as it is only
  // compared with other lines' indentation).
  static std::size_t indentation(std::string_view line) {
    std::size_t k = 0;
    while (k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
    return k;
  }
  // 1: a bullet item, 2: an ordered item, 0: neither. At the top level, items
  // start in column 0 (nested ones are found from their parent's indentation).
  static int list_marker(std::string_view line) {
    if (starts_with(line, "- ") || starts_with(line, "* ")) return 1;
    std::size_t k = 0;
    while (k < line.size() && std::isdigit(static_cast<unsigned char>(line[k]))) ++k;
    if (k > 0 && starts_with(line.substr(k), ". ")) return 2;
    return 0;
  }
  static std::string_view item_text(std::string_view line) {
    if (list_marker(line) == 1) return trim(line.substr(2));
    return trim(line.substr(line.find(". ") + 2));
  }
  static bool paragraph_continues(std::string_view line) {
    const std::string_view t = trim(line);
    return !starts_with(t, "```") && heading_level(t) == 0 && t.front() != '|' && list_marker(line) == 0 &&
           !starts_with(t, kDetailsOpen) && t != "</details>";
  }
  static bool is_separator(std::string_view t) {
    if (t.empty() || t.front() != '|' || t.find('-') == std::string_view::npos) return false;
    return std::all_of(t.begin(), t.end(), [](char c) { return c == '|' || c == '-' || c == ':' || c == ' '; });
  }
  // The cells of a row: split at '|' outside code spans, the outer pipes
  // dropped; an escaped pipe "\\|" is a '|' inside the cell (in a code span
  // too, as in GitHub's tables).
  static std::vector<std::string> cells(std::string_view t) {
    std::vector<std::string> out;
    std::string cell;
    bool in_code = false;
    for (std::size_t k = 1; k < t.size(); ++k) {
      const char c = t[k];
      if (c == '\\' && k + 1 < t.size() && t[k + 1] == '|') {
        cell += '|';
        ++k;
        continue;
      }
      if (c == '`') in_code = !in_code;
      if (c == '|' && !in_code) {
        out.emplace_back(trim(cell));
        cell.clear();
      } else {
        cell += c;
      }
    }
    if (!trim(cell).empty()) out.emplace_back(trim(cell));
    return out;
  }
  static std::vector<std::string> alignments(std::string_view t) {
    std::vector<std::string> out;
    for (const std::string& c : cells(t)) {
      const bool l = !c.empty() && c.front() == ':', r = !c.empty() && c.back() == ':';
      out.push_back(l && r ? "center" : r ? "right" : "");
    }
    return out;
  }
  static std::string align_attr(const std::vector<std::string>& align, std::size_t col) {
    if (col >= align.size() || align[col].empty()) return "";
    return " style=\"text-align:" + align[col] + "\"";
  }
  std::string unique_id(std::string_view text) {
    std::string slug;
    for (const char c : text) {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (!slug.empty() && slug.back() != '-') {
        slug += '-';
      }
    }
    while (!slug.empty() && slug.back() == '-') slug.pop_back();
    std::string id = document_;
    id += '-';
    id += slug;
    const int n = ++ids_[id];
    if (n > 1) {
      id += '-';
      id += std::to_string(n);
    }
    return id;
  }
  // A link the filter refuses is shown as its Markdown `source`: the reader
  // sees where it pointed, and nothing on the page follows it.
  std::string link(const std::string& label, const std::string& target, std::string_view source) {
    std::string href = target;
    if (target.size() > 3 && target.compare(target.size() - 3, 3, ".md") == 0 &&
        target.find('/') == std::string::npos) {
      const std::string stem = target.substr(0, target.size() - 3);
      if (std::find(documents_.begin(), documents_.end(), stem) != documents_.end()) href = "#doc-" + stem;
    }
    if (href == target && !links_(target)) return xml_escape(source);
    return "<a href=\"" + xml_escape(href) + "\">" + inline_text(label) + "</a>";
  }

  std::string document_;
  const std::vector<std::string>& documents_;
  const ImageInliner& image_;
  LinkFilter links_;
  std::map<std::string, int> ids_;
  int open_details_ = 0;
};

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file.string() + ": cannot be read (does it exist?)");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The markup for image `target` of report `markdown`: the figure as
// sanitize_svg writes it again, or, for a figure it refuses, a note saying
// which and why (and a line in `left_out`). Throws for an image the page
// cannot hold at all: a URL, not .svg, outside the report's folder, missing.
std::string figure(const fs::path& markdown, const std::string& target, const std::string& alt,
                   std::vector<std::string>& left_out) {
  const bool remote =
      target.find("://") != std::string::npos || starts_with(target, "//") || starts_with(target, "data:");
  if (remote || fs::path(target).extension() != ".svg" || fs::path(target).is_absolute())
    throw std::runtime_error(markdown.string() + ": image '" + target +
                             "' is not a local .svg file next to the report; the page would not be self-contained");
  const fs::path folder = markdown.parent_path().empty() ? fs::path(".") : markdown.parent_path();
  const fs::path svg = markdown.parent_path() / target;
  // Resolved with its symlinks: a link inside the folder may point anywhere.
  if (!lies_inside(svg, folder))
    throw std::runtime_error(markdown.string() + ": image '" + target + "' lies outside the reports folder " +
                             folder.string() + "; the page shows figures of that folder only");
  if (!fs::is_regular_file(svg))
    throw std::runtime_error(markdown.string() + ": image '" + target + "' not found (looked for " + svg.string() +
                             ")");
  try {
    return "<span class=\"figure\" role=\"img\" aria-label=\"" + xml_escape(alt) + "\">" +
           sanitize_svg(read_text(svg)) + "</span>";
  } catch (const SvgRefused& e) {
    left_out.push_back(markdown.string() + ": image '" + target + "' left out: " + e.what());
    return "<span class=\"left-out\" role=\"note\">image " + xml_escape(target) + " left out: " + xml_escape(e.what()) +
           "</span>";
  }
}

const char* const kStyle =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;line-height:1.5;color:#1f2328;"
    "max-width:1000px;margin:0 auto;padding:24px}"
    "h1,h2,h3{border-bottom:1px solid #d1d9e0;padding-bottom:.3em}"
    "section{margin-bottom:48px}"
    "table{border-collapse:collapse;margin:12px 0;display:block;overflow-x:auto}"
    "th,td{border:1px solid #d1d9e0;padding:4px 10px}"
    "tr:nth-child(2n){background:#f6f8fa}"
    "code{background:#eff1f3;padding:1px 4px;border-radius:4px;font-size:90%}"
    "pre{background:#f6f8fa;padding:12px;overflow-x:auto;line-height:1.3;white-space:pre-wrap}"
    "pre code{background:none;padding:0}"
    "figure{margin:12px 0}figure svg{max-width:100%;height:auto}"
    ".left-out{display:inline-block;border:1px dashed #cf222e;color:#cf222e;padding:8px 12px}"
    "nav li{margin:2px 0}";

}  // namespace

std::string markdown_to_html(std::string_view markdown, const std::string& document,
                             const std::vector<std::string>& documents, const ImageInliner& image,
                             const LinkFilter& links) {
  LinkFilter filter = links;
  if (!filter) filter = [](const std::string& target) { return link_allowed(target, {}); };
  Converter converter(document, documents, image, std::move(filter));
  return converter.convert(markdown);
}

std::string html_page(const std::string& title, const std::vector<fs::path>& markdown_files,
                      std::vector<std::string>* left_out) {
  std::vector<std::string> refused;
  std::vector<std::string> names;
  for (const fs::path& f : markdown_files) names.push_back(f.stem().string());
  std::string body, contents;
  for (std::size_t i = 0; i < markdown_files.size(); ++i) {
    const fs::path& file = markdown_files[i];
    const std::string markdown = read_text(file);
    const ImageInliner inline_svg = [&](const std::string& target, const std::string& alt) {
      return figure(file, target, alt, refused);
    };
    const fs::path folder = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    const LinkFilter links = [&](const std::string& target) { return link_allowed(target, folder); };
    body += "<section id=\"doc-" + xml_escape(names[i]) + "\">\n";
    body += markdown_to_html(markdown, names[i], names, inline_svg, links);
    body += "</section>\n";
    // The table of contents names each document by its first heading.
    std::string heading = names[i];
    for (std::size_t pos = 0; pos < markdown.size();) {
      const std::size_t nl = std::min(markdown.find('\n', pos), markdown.size());
      const std::string_view line = std::string_view(markdown).substr(pos, nl - pos);
      if (starts_with(line, "# ")) {
        heading = std::string(trim(line.substr(2)));
        break;
      }
      pos = nl + 1;
    }
    contents += "<li><a href=\"#doc-" + xml_escape(names[i]) + "\">" + xml_escape(heading) + "</a> (" +
                xml_escape(names[i]) + ".md)</li>\n";
  }
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" +
                     xml_escape(title) + "</title>\n<style>";
  page += kStyle;
  page += "</style>\n</head>\n<body>\n<header>\n<h1>" + xml_escape(title) + "</h1>\n<nav>\n<ul>\n";
  page += contents;
  page += "</ul>\n</nav>\n</header>\n<main>\n";
  page += body;
  page += "</main>\n</body>\n</html>\n";
  if (left_out) left_out->insert(left_out->end(), refused.begin(), refused.end());
  return page;
}

std::vector<fs::path> report_files(const fs::path& directory, const std::vector<std::string>& first) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(directory))
    // A link to a file outside the folder is not a report of it (report/link_policy.h).
    if (e.is_regular_file() && e.path().extension() == ".md" && lies_inside(e.path(), directory))
      files.push_back(e.path());
  const auto rank = [&](const fs::path& f) {
    return static_cast<std::size_t>(std::find(first.begin(), first.end(), f.filename().string()) - first.begin());
  };
  std::sort(files.begin(), files.end(), [&](const fs::path& a, const fs::path& b) {
    const std::size_t ra = rank(a), rb = rank(b);
    if (ra != rb) return ra < rb;
    return a.filename() < b.filename();
  });
  return files;
}

}  // namespace mpverify::report
