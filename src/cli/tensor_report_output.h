// What `analyze` and `swamp` share: writing an output to stdout or atomically
// to a file, the list of scales, and the failures' JSON and lines.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/dump_analysis.h"

namespace mpverify::cli {

// Writes `content` to `file` (atomically: FILE.tmp + rename), or to stdout when `file` is empty.
void emit(const std::string& file, const std::string& content);

// "1,8,64" -> {1, 8, 64}; also accepts 2^k terms ("1,2^8,2^16"). UsageError
// naming the option and the bad term otherwise, or when a scale is not a finite positive float value.
std::vector<double> parse_scales(const std::string& text, const std::string& option = "--scales");

nlohmann::json failures_json(const std::vector<analysis::ReadFailure>& failures);
// "FILE: tensor 'T', byte offset N: reason" for stderr.
std::string failure_line(const analysis::ReadFailure& f);

// Files that could not be read are bad input: each is listed on stderr ("mpverify COMMAND: FILE: ..."),
// then a UsageError (exit 2, before anything is written) says how to go on. With `skip` (the command's
// --skip-unreadable) they are listed the same way as warnings and the command goes on with the rest.
void refuse_unreadable(const std::string& command, const std::vector<analysis::ReadFailure>& failures, bool skip);

// A CSV field, quoted when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);

}  // namespace mpverify::cli
