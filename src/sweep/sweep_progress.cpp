#include "sweep/sweep_progress.h"

#include <cmath>
#include <cstdio>
#include <unistd.h>

namespace mpverify::sweep {

SweepProgress::SweepProgress(std::size_t total, std::size_t done, std::size_t parallel, bool quiet)
    : total_(total), done_(done), parallel_(parallel < 1 ? 1 : parallel), quiet_(quiet), terminal_(::isatty(2) != 0) {}

std::string SweepProgress::status() const {
  std::string s = "sweep: " + std::to_string(done_) + "/" + std::to_string(total_) + " done, " +
                  std::to_string(running_) + " running, " + std::to_string(failed_) + " failed";
  if (timed_ > 0 && done_ < total_) {
    // The mean run so far, the runs left shared among the parallel slots.
    const double left = seconds_ / static_cast<double>(timed_) * static_cast<double>(total_ - done_) /
                        static_cast<double>(parallel_);
    const long seconds = std::lround(left);
    char eta[48];
    std::snprintf(eta, sizeof eta, ", about %ldm %02lds left", seconds / 60, seconds % 60);
    return s + eta;
  }
  return s;
}

void SweepProgress::show() {
  if (quiet_ || !terminal_) return;
  std::fprintf(stderr, "\r%-78s", status().c_str());
  std::fflush(stderr);
}

void SweepProgress::say(const std::string& line) {
  if (quiet_) return;
  if (terminal_) std::fprintf(stderr, "\r%-78s\r", "");
  std::fprintf(stderr, "%s\n", line.c_str());
  show();
}

void SweepProgress::started(const std::string&) {
  ++running_;
  show();
}

void SweepProgress::finished(const std::string& run, double seconds) {
  --running_;
  ++done_;
  ++timed_;
  seconds_ += seconds;
  if (!terminal_ && !quiet_) {
    char line[256];
    std::snprintf(line, sizeof line, "sweep: [%zu/%zu] %s done in %.1f s", done_, total_, run.c_str(), seconds);
    say(line);
  }
  show();
}

void SweepProgress::redone(const std::string& run, const std::string& why) {
  --running_;
  say("sweep: " + run + " " + why + "; training it again");
}

void SweepProgress::failed(const std::string&) {
  --running_;
  ++failed_;
  show();
}

void SweepProgress::end() {
  if (quiet_ || !terminal_) return;
  std::fprintf(stderr, "\r%-78s\n", status().c_str());
}

}  // namespace mpverify::sweep
