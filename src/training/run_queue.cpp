#include "training/run_queue.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "io/json_text.h"
#include "record/run_log.h"

namespace mpverify::training {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_summary(const fs::path& dir) {
  if (!fs::exists(dir / "summary.json")) throw std::runtime_error(dir.string() + ": the run wrote no summary.json");
  return io::read_json_file(dir / "summary.json");
}

std::string outcome_text(const json& summary) {
  char buf[64];
  const auto eval = summary.find("evaluation");
  if (eval != summary.end() && eval->is_object() && eval->contains("test_accuracy")) {
    const json& a = (*eval)["test_accuracy"];
    if (!a.is_number()) return "diverged";
    std::snprintf(buf, sizeof buf, "test accuracy %.2f%%", 100.0 * a.get<double>());
    return buf;
  }
  const auto loss = summary.find("final_loss");
  if (loss != summary.end() && loss->is_number()) {
    std::snprintf(buf, sizeof buf, "final loss %.4g", loss->get<double>());
    return buf;
  }
  return "done";
}

// Each run's directory and summary.json "config", in the queue's order: what the journal holds, and
// what a kept run's summary must match. Building each Trainer also validates its configuration.
json queue_plan(const std::vector<QueuedRun>& runs) {
  json plan = json::array();
  for (const QueuedRun& r : runs) {
    const Trainer check(r.config);  // throws for a setting it cannot run
    plan.push_back({{"dir", r.dir.string()}, {"config", check.summary()["config"]}});
  }
  return plan;
}

bool journal_matches(const fs::path& journal, const json& plan) {
  if (journal.empty() || !fs::exists(journal)) return false;
  try {
    return io::read_json_file(journal) == plan;
  } catch (const std::runtime_error&) {
    return false;  // unreadable: treated as another queue's
  }
}

// A run of the resumed queue that finished before the kill: its summary.json holds its configuration.
bool finished_earlier(const json& planned) {
  const fs::path summary = fs::path(planned["dir"].get<std::string>()) / "summary.json";
  if (!fs::exists(summary)) return false;
  try {
    return io::read_json_file(summary).value("config", json()) == planned["config"];
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace

std::vector<FinishedRun> run_queue(const std::vector<QueuedRun>& runs, std::size_t jobs,
                                   const std::function<void(const std::string&)>& progress,
                                   const std::filesystem::path& journal,
                                   const std::function<void(bool resuming)>& on_start) {
  if (jobs < 1) throw std::invalid_argument("run_queue: jobs must be at least 1");
  const json plan = queue_plan(runs);
  const bool resuming = journal_matches(journal, plan);
  if (on_start) on_start(resuming);
  std::vector<bool> keep(runs.size(), false);
  if (resuming) {
    // A run with an extra observer (a census) is trained again: its observer must see the training.
    for (std::size_t i = 0; i < runs.size(); ++i) keep[i] = !runs[i].config.extra_observer && finished_earlier(plan[i]);
  } else if (!journal.empty()) {
    fs::create_directories(journal.parent_path());
    record::write_file_atomically(journal, plan.dump(1) + "\n");
  }
  std::vector<FinishedRun> finished(runs.size());
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  std::size_t done = 0;
  std::exception_ptr failure;
  const auto worker = [&] {
    for (;;) {
      const std::size_t i = next++;
      if (i >= runs.size()) return;
      {
        const std::lock_guard lock(mutex);
        if (failure) return;
      }
      try {
        const auto start = std::chrono::steady_clock::now();
        if (!keep[i]) {
          fs::remove_all(runs[i].dir);
          run_training(runs[i].config, runs[i].dir);
          finished[i].wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
        finished[i].summary = read_summary(runs[i].dir);
        const std::lock_guard lock(mutex);
        ++done;
        if (progress) {
          char seconds[32];
          std::snprintf(seconds, sizeof seconds, "%.1f s", finished[i].wall_seconds);
          std::string line = "[";  // piecewise: GCC 12's false -Wrestrict on "literal" + string
          line += std::to_string(done);
          line += '/';
          line += std::to_string(runs.size());
          line += "] ";
          line += runs[i].label;
          line += ": ";
          line += outcome_text(finished[i].summary);
          line += ", ";
          line += keep[i] ? std::string("kept (finished before the queue was interrupted)") : std::string(seconds);
          progress(line);
        }
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < std::min(jobs, runs.size()); ++k) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  if (!journal.empty()) fs::remove(journal);  // every run finished: nothing left to resume
  return finished;
}

}  // namespace mpverify::training
