// mpverify report-page [DIR] [--first study.md,a.md,...] [--out DIR/index.html]
// Every Markdown report of a directory on one self-contained HTML page, the
// figures (local .svg files) inlined (report/html_page.h does the work).
// Exit codes: 0 when the page is written, also when figures were left out by
// the sanitiser (report/svg_sanitize.h; one warning line each on stderr, a
// note on the page), since the rest of the page is sound and a report folder
// is not a verdict; 2 with no page for bad input: no directory, no report, an
// image that is not a local .svg file, is missing or lies outside DIR.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "record/run_log.h"
#include "report/html_page.h"

namespace mpverify::cli {

void add_report_page_command(CLI::App& root, std::vector<Command>& commands) {
  struct Options {
    std::string dir = "reports", out, title = "mpverify reports";
    std::vector<std::string> first{"study.md"};
  };
  auto o = std::make_shared<Options>();
  auto* app = root.add_subcommand(
      "report-page",
      "Turn every *.md report of a directory into one self-contained HTML page (figures inlined, nothing\n"
      "fetched). Example: mpverify report-page reports   # writes reports/index.html");
  app->add_option("dir", o->dir, "The reports' directory")->capture_default_str();
  app->add_option("--first", o->first,
                  "The reports put first, in this order (file names, comma-separated; those present); the others "
                  "follow by name")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--out", o->out, "The page (default: DIR/index.html)");
  app->add_option("--title", o->title, "The page's title")->capture_default_str();
  commands.push_back({app, [o]() {
    namespace fs = std::filesystem;
    if (!fs::is_directory(o->dir)) throw UsageError("'" + o->dir + "' is not a directory of reports");
    const std::vector<fs::path> files = report::report_files(o->dir, o->first);
    if (files.empty()) throw UsageError("'" + o->dir + "' holds no *.md report");
    std::string page;
    std::vector<std::string> left_out;
    try {
      page = report::html_page(o->title, files, &left_out);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
    const fs::path out = o->out.empty() ? fs::path(o->dir) / "index.html" : fs::path(o->out);
    record::write_file_atomically(out, page);
    for (const std::string& line : left_out) std::cerr << "mpverify report-page: warning: " << line << "\n";
    std::cout << "wrote " << out.string() << " (" << files.size() << " reports";
    if (!left_out.empty()) std::cout << "; " << left_out.size() << " figure(s) left out, see the warnings";
    std::cout << ")\n";
    return 0;
  }});
}

}  // namespace mpverify::cli
