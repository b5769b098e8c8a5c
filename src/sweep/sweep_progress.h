// A sweep's progress on standard error: runs done / running / failed and the time left. On a terminal one
// line is rewritten in place; otherwise (a log file, a Slurm job) a line per finished run. Nothing of it
// goes into the sweep's files.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace mpverify::sweep {

class SweepProgress {
 public:
  // `total` runs in the plan (or the shard), `done` of them finished before this start, `parallel` trained
  // at a time (the time left assumes they keep that pace).
  SweepProgress(std::size_t total, std::size_t done, std::size_t parallel, bool quiet);

  void started(const std::string& run);
  void finished(const std::string& run, double seconds);
  void redone(const std::string& run, const std::string& why);  // killed in flight: trained again
  void failed(const std::string& run);
  void say(const std::string& line);  // a message that must not be overwritten by the status line
  void end();                         // leaves the status line's last state on its own line

  std::size_t done() const { return done_; }

 private:
  void show();
  std::string status() const;

  std::size_t total_, done_, running_ = 0, failed_ = 0, parallel_, timed_ = 0;
  double seconds_ = 0;  // of the runs finished by this start
  bool quiet_, terminal_;
};

}  // namespace mpverify::sweep
