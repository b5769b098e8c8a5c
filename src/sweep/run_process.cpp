#include "sweep/run_process.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace mpverify::sweep {

namespace fs = std::filesystem;

std::string own_executable() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the running program (/proc/self/exe): " + ec.message());
  return self.string();
}

namespace {

// The last `max_bytes` of the child's output: where train says why it failed.
std::string log_tail(const fs::path& log, std::size_t max_bytes = 2000) {
  std::ifstream in(log, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// What a run's process inherits of the environment: not an MPI launcher's variables (the run is no MPI
// process: it must not take itself for a rank), and not the fault injection when it is redone.
bool inherited(const char* variable, bool without_fault_injection) {
  const std::string_view v(variable);
  if (v.starts_with("OMPI_") || v.starts_with("PMIX_") || v.starts_with("PMI_")) return false;
  return !(without_fault_injection && v.starts_with("MPVERIFY_KILL_AT_WRITE="));
}

}  // namespace

RunProcess start_run_process(const std::string& program, const std::vector<std::string>& arguments,
                             const fs::path& dir, bool without_fault_injection) {
  // Everything the child needs is built before fork: between fork and exec only async-signal-safe calls
  // are allowed (an MPI library may have started threads in the parent).
  std::vector<std::string> words{program, "train"};
  words.insert(words.end(), arguments.begin(), arguments.end());
  for (const char* w : {"--out", dir.c_str(), "--quiet"}) words.emplace_back(w);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (inherited(*e, without_fault_injection)) envp.push_back(*e);
  envp.push_back(nullptr);
  std::string log = (fs::temp_directory_path() / "mpverify-sweep-run-XXXXXX").string();
  const int fd = ::mkstemp(log.data());
  if (fd < 0) throw std::runtime_error("cannot create a log file in " + fs::temp_directory_path().string() + ": " +
                                       std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw std::runtime_error(std::string("cannot start a run (fork): ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the sweep died before the line above took effect
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  return {pid, log};
}

RunExit run_exit(const RunProcess& process, int status) {
  RunExit e;
  if (WIFSIGNALED(status)) {
    e.kind = RunExit::Kind::killed;
    e.why = std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    e.kind = RunExit::Kind::finished;
  } else {
    e.kind = RunExit::Kind::failed;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    e.why = "mpverify train exited with " + std::to_string(code) + (code == 127 ? " (could not be started)" : "") +
            ":\n" + log_tail(process.log);
  }
  std::error_code ignored;
  fs::remove(process.log, ignored);
  return e;
}

RunExit run_to_completion(const std::string& program, const std::vector<std::string>& arguments, const fs::path& dir,
                          bool without_fault_injection) {
  const RunProcess p = start_run_process(program, arguments, dir, without_fault_injection);
  int status = 0;
  while (::waitpid(p.pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error(std::string("waiting for a run: ") + std::strerror(errno));
  return run_exit(p, status);
}

}  // namespace mpverify::sweep
