// Runs a program directly (fork and exec, no shell) so that a test can tell a kill by SIGKILL from an
// exit, with the fault injection of record::write_file_atomically (MPVERIFY_KILL_AT_WRITE=N: the N-th
// atomic write writes half its file and kills the process) and a file-size limit standing in for a full
// disk. How the kill-and-resume tests stop a command at every write.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mpverify::test {

struct Ended {
  bool killed = false;  // by SIGKILL
  int exit_code = -1;   // when it exited
};

// Runs argv (standard output discarded, standard error into `errors` when given) with
// MPVERIFY_KILL_AT_WRITE=kill_at unless it is empty or "0" ("N": the N-th write; "NAME:N": the N-th write
// of a file named NAME), and files limited to max_file_bytes when > 0 (a full disk as a writer sees it:
// write() fails with EFBIG once a file would grow past it).
inline Ended run_program(const std::vector<std::string>& args, const std::string& kill_at,
                         const std::filesystem::path& errors = "/dev/null", rlim_t max_file_bytes = 0) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!kill_at.empty() && kill_at != "0") ::setenv("MPVERIFY_KILL_AT_WRITE", kill_at.c_str(), 1);
    else ::unsetenv("MPVERIFY_KILL_AT_WRITE");
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen(errors.c_str(), "w", stderr)) ::_exit(126);
    if (max_file_bytes > 0) {
      ::signal(SIGXFSZ, SIG_IGN);  // else the signal kills the writer; ignored, write() returns EFBIG
      const rlimit limit{max_file_bytes, max_file_bytes};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(125);
    }
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Ended e;
  e.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
  return e;
}

// The summary.json files under dir (a run writes its summary last: those runs had finished) and when
// each was written. A resumed command must keep them: the same files, not rewritten.
inline std::map<std::string, std::filesystem::file_time_type> finished_runs(const std::filesystem::path& dir) {
  std::map<std::string, std::filesystem::file_time_type> runs;
  if (!std::filesystem::exists(dir)) return runs;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() == "summary.json")
      runs[e.path().string()] = std::filesystem::last_write_time(e.path());
  return runs;
}

}  // namespace mpverify::test
