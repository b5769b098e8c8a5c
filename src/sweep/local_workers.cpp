#include "sweep/local_workers.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <sys/wait.h>

#include "sweep/run_process.h"

namespace mpverify::sweep {

namespace fs = std::filesystem;

namespace {

struct Running {
  std::size_t run = 0;
  std::size_t attempt = 1;
  RunProcess process;
  std::chrono::steady_clock::time_point start;
};

struct Waiting {
  std::size_t run = 0;
  std::size_t attempt = 1;
};

}  // namespace

std::string run_failure(const SweepPlan& plan, std::size_t run, const std::string& why) {
  return plan.runs.at(run).dir.string() + ": " + why;
}

void run_with_workers(const SweepPlan& plan, const fs::path& out, const std::vector<std::size_t>& runs,
                      const std::string& program, std::size_t workers, SweepProgress& progress) {
  std::deque<Waiting> waiting;
  for (std::size_t r : runs) waiting.push_back({r, 1});
  std::map<pid_t, Running> running;
  std::string failure;
  while (!running.empty() || (!waiting.empty() && failure.empty())) {
    while (failure.empty() && !waiting.empty() && running.size() < workers) {
      const Waiting w = waiting.front();
      waiting.pop_front();
      const fs::path dir = out / plan.runs[w.run].dir;
      fs::remove_all(dir);  // what an interrupted run left
      const RunProcess p = start_run_process(program, run_arguments(plan, plan.runs[w.run]), dir, w.attempt > 1);
      running[p.pid] = {w.run, w.attempt, p, std::chrono::steady_clock::now()};
      progress.started(plan.runs[w.run].dir.string());
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("waiting for the runs: ") + std::strerror(errno));
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;  // not one of ours
    const Running r = it->second;
    running.erase(it);
    const RunExit e = run_exit(r.process, status);
    const std::string name = plan.runs[r.run].dir.string();
    if (e.kind == RunExit::Kind::finished) {
      progress.finished(name, std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count());
    } else if (e.kind == RunExit::Kind::killed && r.attempt < kMaxAttempts) {
      progress.redone(name, e.why);
      waiting.push_front({r.run, r.attempt + 1});
    } else {
      progress.failed(name);
      if (failure.empty()) failure = run_failure(plan, r.run, e.why);
    }
  }
  if (!failure.empty()) throw SweepRunError(failure);
}

}  // namespace mpverify::sweep
