// Where a report's files go and how they are written: the figures sit next to
// the Markdown report as <report stem>-<what>.<ext>, and every file is written
// atomically (a temporary file renamed), so an interrupted run leaves no
// partial report behind.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mpverify::report {

// reports/study.md, "loss" -> reports/study-loss.svg
std::filesystem::path figure_path(const std::filesystem::path& report, std::string_view what,
                                  std::string_view extension = ".svg");

// Writes `content` to `path` atomically (creating the directory) and appends
// the path to `written`.
void write_output(const std::filesystem::path& path, const std::string& content,
                  std::vector<std::filesystem::path>& written);

}  // namespace mpverify::report
