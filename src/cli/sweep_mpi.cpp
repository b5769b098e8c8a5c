#include "cli/sweep_mpi.h"

#include "cli/commands.h"
#include "cli/mpi_session.h"

#ifdef MPVERIFY_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "sweep/local_workers.h"
#include "sweep/run_process.h"
#include "sweep/sweep_directory.h"
#include "sweep/sweep_summary.h"
#endif

namespace mpverify::cli {

#ifndef MPVERIFY_WITH_MPI

int run_mpi_sweep(const MpiSweepJob&) {
  throw UsageError(mpi_unavailable_reason() + "; run the sweep with --workers N or --shard I/N instead");
}

#else

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Messages, each three long longs:
//   rank -> 0, kReport: {run, attempt, outcome} of the run just ended (run -1: none yet); a failed run's
//              reason follows as characters, kReason
//   rank -> 0, kAlive:  {run, 0, 0} every second while the run trains
//   0 -> rank, kAssign: {run, attempt, 0}, or {-1, 0, ended_without_finalize}: stop
constexpr int kReport = 1, kAssign = 2, kReason = 3, kAlive = 4;
enum RunOutcome : long long { none = 0, finished = 1, killed = 2, failed = 3 };
constexpr auto kHeartbeat = std::chrono::seconds(1);

void send3(long long a, long long b, long long c, int to, int tag) {
  long long m[3] = {a, b, c};
  MPI_Send(m, 3, MPI_LONG_LONG, to, tag, MPI_COMM_WORLD);
}

// Rank 0's side: hands out the runs, redoes killed ones and the runs of ranks that fell silent, and stops
// every rank once nothing is left to train.
class Coordinator {
 public:
  Coordinator(const sweep::SweepPlan& plan, const std::vector<std::size_t>& pending, int ranks,
              sweep::SweepProgress& progress, double timeout_s)
      : plan_(plan), ranks_(static_cast<std::size_t>(ranks)), progress_(progress),
        timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))) {
    for (std::size_t r : pending) waiting_.emplace_back(static_cast<long long>(r), 1);
    for (Rank& r : ranks_) r.heard = Clock::now();
  }

  // Returns the reason of the first run that failed ("" when none did).
  std::string run() {
    while (!all_ended()) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
      if (flag) {
        receive(status.MPI_SOURCE, status.MPI_TAG);
      } else {
        find_silent_ranks();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      hand_out();
    }
    return failure_;
  }

  bool a_rank_died() const { return died_; }

 private:
  struct Rank {
    bool busy = false, idle = false, stopped = false, dead = false;
    long long run = -1, attempt = 0;
    Clock::time_point heard, started;
  };

  void receive(int from, int tag) {
    long long m[3];
    MPI_Recv(m, 3, MPI_LONG_LONG, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Rank& r = ranks_[static_cast<std::size_t>(from)];
    r.heard = Clock::now();
    if (tag != kReport) return;  // a heartbeat
    if (m[0] >= 0) ended(from, m[0], m[1], static_cast<RunOutcome>(m[2]));
    r.busy = false;
    r.idle = true;
  }

  void ended(int from, long long run, long long attempt, RunOutcome outcome) {
    const std::string name = plan_.runs[static_cast<std::size_t>(run)].dir.string();
    const double seconds = std::chrono::duration<double>(Clock::now() - ranks_[static_cast<std::size_t>(from)].started).count();
    if (outcome == finished) {
      progress_.finished(name, seconds);
      return;
    }
    std::string why = "was killed on rank " + std::to_string(from);
    if (outcome == failed) {
      MPI_Status status;
      int length = 0;
      MPI_Probe(from, kReason, MPI_COMM_WORLD, &status);
      MPI_Get_count(&status, MPI_CHAR, &length);
      why.assign(static_cast<std::size_t>(length), '\0');
      MPI_Recv(why.data(), length, MPI_CHAR, from, kReason, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    redo_or_fail(run, attempt, outcome == killed, why);
  }

  void redo_or_fail(long long run, long long attempt, bool may_redo, const std::string& why) {
    const std::string name = plan_.runs[static_cast<std::size_t>(run)].dir.string();
    if (may_redo && attempt < static_cast<long long>(sweep::kMaxAttempts)) {
      progress_.redone(name, why);
      waiting_.emplace_front(run, attempt + 1);
      return;
    }
    progress_.failed(name);
    if (failure_.empty()) failure_ = sweep::run_failure(plan_, static_cast<std::size_t>(run), why);
  }

  // A busy rank silent for longer than the timeout died (mpirun --enable-recovery kept the job alive): its
  // run is handed out again.
  void find_silent_ranks() {
    for (std::size_t i = 1; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      if (!r.busy || Clock::now() - r.heard < timeout_) continue;
      r.busy = false;
      r.dead = died_ = true;
      redo_or_fail(r.run, r.attempt, true, "was on rank " + std::to_string(i) + ", which stopped answering");
    }
  }

  // Idle ranks get the waiting runs; once nothing is waiting or running (or a run failed), they stop.
  void hand_out() {
    bool running = false;
    for (const Rank& r : ranks_) running = running || r.busy;
    for (std::size_t i = 1; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      if (!r.idle) continue;
      if (failure_.empty() && !waiting_.empty()) {
        std::tie(r.run, r.attempt) = waiting_.front();
        waiting_.pop_front();
        r.idle = false;
        r.busy = running = true;
        r.started = r.heard = Clock::now();
        progress_.started(plan_.runs[static_cast<std::size_t>(r.run)].dir.string());
        send3(r.run, r.attempt, 0, static_cast<int>(i), kAssign);
      } else if (!running || !failure_.empty()) {
        r.idle = false;
        r.stopped = true;
        send3(-1, 0, died_ ? 1 : 0, static_cast<int>(i), kAssign);
      }
    }
  }

  bool all_ended() const {
    for (std::size_t i = 1; i < ranks_.size(); ++i)
      if (!ranks_[i].stopped && !ranks_[i].dead) return false;
    return true;
  }

  const sweep::SweepPlan& plan_;
  std::vector<Rank> ranks_;
  sweep::SweepProgress& progress_;
  Clock::duration timeout_;
  std::deque<std::pair<long long, long long>> waiting_;  // {run, attempt}
  std::string failure_;
  bool died_ = false;
};

// Trains one run as a child process, with a heartbeat to rank 0 every second while it does.
sweep::RunExit train_with_heartbeat(const sweep::SweepPlan& plan, const fs::path& out, long long run,
                                    long long attempt) {
  const sweep::SweepRun& r = plan.runs.at(static_cast<std::size_t>(run));
  fs::remove_all(out / r.dir);  // what an interrupted run left
  const sweep::RunProcess p = sweep::start_run_process(sweep::own_executable(), sweep::run_arguments(plan, r),
                                                       out / r.dir, attempt > 1);
  auto beat = Clock::now();
  for (;;) {
    int status = 0;
    const pid_t ended = ::waitpid(p.pid, &status, WNOHANG);
    if (ended == p.pid) return sweep::run_exit(p, status);
    if (ended < 0 && errno != EINTR) throw std::runtime_error("waiting for a run failed");
    if (Clock::now() - beat >= kHeartbeat) {
      send3(run, 0, 0, 0, kAlive);
      beat = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A training rank's side: asks for a run, trains it, reports, until told to stop. Returns whether to end
// without MPI_Finalize (a rank died).
bool train_handed_runs(const sweep::SweepPlan& plan, const fs::path& out) {
  long long report[3] = {-1, 0, none};
  std::string why;
  for (;;) {
    send3(report[0], report[1], report[2], 0, kReport);
    if (report[2] == failed) MPI_Send(why.data(), static_cast<int>(why.size()), MPI_CHAR, 0, kReason, MPI_COMM_WORLD);
    long long m[3];
    MPI_Recv(m, 3, MPI_LONG_LONG, 0, kAssign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (m[0] < 0) return m[2] != 0;
    const sweep::RunExit e = train_with_heartbeat(plan, out, m[0], m[1]);
    report[0] = m[0];
    report[1] = m[1];
    report[2] = e.kind == sweep::RunExit::Kind::finished ? finished
                : e.kind == sweep::RunExit::Kind::killed ? killed
                                                         : failed;
    why = e.why;
  }
}

[[noreturn]] void end_without_finalize(int code) {
  // MPI_Finalize would wait for the rank that died; every file is written and closed by now.
  std::cout.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

// Rank 0: plans (a refusal stops every rank before any run), hands out, finishes.
int lead(const MpiSweepJob& job, int ranks) {
  sweep::SweepPlan plan;
  std::vector<nlohmann::json> configs;
  std::vector<std::size_t> pending;
  int ready = 1;
  try {
    std::tie(plan, configs) = job.validate();
    with_usage_errors([&] { sweep::open_sweep_directory(job.out, plan); });
    pending = sweep::unfinished_runs(plan, job.out, configs);
  } catch (...) {
    ready = 0;
    MPI_Bcast(&ready, 1, MPI_INT, 0, MPI_COMM_WORLD);
    throw;
  }
  MPI_Bcast(&ready, 1, MPI_INT, 0, MPI_COMM_WORLD);
  sweep::SweepProgress progress(plan.runs.size(), plan.runs.size() - pending.size(),
                                static_cast<std::size_t>(ranks - 1), job.quiet);
  progress.say("sweep: " + std::to_string(pending.size()) + " of " + std::to_string(plan.runs.size()) +
               " runs to train on " + std::to_string(ranks - 1) + " MPI ranks");
  Coordinator coordinator(plan, pending, ranks, progress, job.rank_timeout_s);
  const std::string failure = coordinator.run();
  progress.end();
  int code = 2;
  if (failure.empty()) code = job.print(sweep::finish_sweep(plan, job.out, configs));
  else std::cerr << "mpverify sweep: error: a run failed: " << failure << "\n";
  if (coordinator.a_rank_died()) end_without_finalize(code);
  return code;
}

}  // namespace

int run_mpi_sweep(const MpiSweepJob& job) {
  const MpiSession session;
  if (session.size() < 2)
    throw UsageError("an MPI sweep needs at least 2 ranks (rank 0 hands out the runs, the others train them); "
                     "on one machine use --workers N");
  if (session.rank() == 0) return lead(job, session.size());
  int ready = 0;
  MPI_Bcast(&ready, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ready) return 0;  // rank 0 refused the plan and says why
  try {
    if (train_handed_runs(sweep::read_sweep_plan(job.plan_file), job.out)) end_without_finalize(0);
  } catch (const std::exception& e) {
    // Rank 0 waits for this rank's reports: without it the sweep cannot go on, and must not hang.
    std::cerr << "mpverify sweep: rank " << session.rank() << ": " << e.what() << "\n";
    session.abort(2);
  }
  return 0;
}

#endif

}  // namespace mpverify::cli
