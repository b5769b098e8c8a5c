// A run directory's step log (steps.jsonl, one JSON object per line) and its
// summary (summary.json), written so that a killed run leaves its completed
// steps readable and never a half-written file.
//
// Every publication of the log writes the WHOLE file to steps.jsonl.tmp,
// fsyncs it, renames it over steps.jsonl and fsyncs the directory. rename()
// replaces the name atomically, so any reader (ours, jq, pandas) sees either
// the previous complete file or the new one, never a partial line, and with
// no special reader. The price is O(file size) per publication, which is why
// `publish_every` exists: a long run can publish every N steps (the steps in
// between are lost on a kill, but never half-written); the default publishes
// every step. Appending lines in place with write + fsync would be O(line), but
// a kill or power loss mid-write leaves a partial last line that every reader
// would have to know to ignore, which a run log must never ask of them.
//
// A stray steps.jsonl.tmp (from a run killed while publishing) is never read,
// and is replaced by the next publication. Errors are OutputError naming the
// path and the system's reason; a publication that fails removes its
// temporary file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpverify::record {

// A file or directory of the run could not be written (unwritable place, full disk, ...): the message
// names the path and the system's reason. The command line exits 2 on it, as on any bad --out.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class RunLog {
 public:
  // Creates `dir` (and its parents) when needed. The log starts empty: an
  // existing steps.jsonl is replaced at the first publication.
  // `file_name` names the log in `dir` (steps.jsonl; a run keeps its per-tensor
  // records and histograms in logs of their own, published the same way).
  explicit RunLog(std::filesystem::path dir, std::size_t publish_every = 1, std::string file_name = "steps.jsonl");
  // Publishes the steps not yet published; errors are swallowed here (call
  // flush() to see them).
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // Adds one step (serialised on one line; non-finite numbers become null, as
  // JSON has no NaN) and publishes when publish_every steps are pending.
  void append(const nlohmann::json& step);
  // A line already written as JSON text (one object, no newline), e.g. by record::JsonLine.
  void append_text(std::string_view line);
  // Publishes now (a no-op when nothing is pending).
  void flush();
  // summary.json, pretty-printed, through summary.json.tmp + rename.
  void write_summary(const nlohmann::json& summary);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path steps_path() const { return dir_ / file_name_; }
  std::size_t steps_appended() const { return appended_; }

 private:
  std::filesystem::path dir_;
  std::size_t publish_every_;
  std::string file_name_;
  std::string content_;  // every appended line
  std::size_t appended_ = 0;
  std::size_t published_ = 0;
};

// summary.json in `dir`, pretty-printed, through summary.json.tmp + rename (RunLog::write_summary).
void write_summary(const std::filesystem::path& dir, const nlohmann::json& summary);

// Writes `content` to `path` atomically: path.tmp, fsync, rename, fsync of the
// directory. OutputError naming the path and errno's text on failure, with the temporary file removed.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

// The steps of a run directory's steps.jsonl, in order; std::runtime_error
// naming the file (and the line) when it cannot be read or a line is not JSON.
std::vector<nlohmann::json> read_steps(const std::filesystem::path& dir);
// The lines of any JSON Lines file, in order (read_steps is this on dir/steps.jsonl).
std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& path);

}  // namespace mpverify::record
