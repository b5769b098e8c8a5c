// Runs a shell command with the given standard input and captures standard
// output and the exit code: how the CLI tests drive the built `mpverify`.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace mpverify::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // standard output (and standard error when asked for)
};

inline CommandResult run_command(const std::string& command, const std::string& input, bool with_stderr = false) {
  char path[] = "/tmp/mpverify-test-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  std::ofstream(path) << input;
  CommandResult r;
  FILE* pipe = popen((command + " < " + path + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::remove(path);
  return r;
}

}  // namespace mpverify::test
