#include "record/run_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "io/input_file.h"
#include "io/json_text.h"

namespace mpverify::record {

namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int error) {
  std::string message = "run log: ";
  message += what;
  message += " '";
  message += path.string();
  message += "': ";
  message += std::strerror(error);
  throw OutputError(message);
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void fsync_directory(const std::filesystem::path& dir) {
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd < 0) fail("cannot open directory", dir, errno);
  if (::fsync(d.fd) != 0) fail("cannot fsync directory", dir, errno);
}

// Fault injection for the kill-and-resume tests: with MPVERIFY_KILL_AT_WRITE=N in the environment, the
// N-th atomic write of the process writes half its content to the temporary file and the process kills
// itself (SIGKILL, as a scheduler or the OOM killer would), so a test can stop a run at every write,
// mid-write included, deterministically. MPVERIFY_KILL_AT_WRITE=NAME:N counts only the writes of files
// named NAME (summary.json:2, the second summary written). Unset (always, outside tests) it costs one
// relaxed load.
bool kill_point_reached(const std::filesystem::path& path) {
  struct KillPoint {
    std::string name;  // empty: every file counts
    long at = 0;
  };
  static const KillPoint point = [] {
    KillPoint p;
    const char* v = std::getenv("MPVERIFY_KILL_AT_WRITE");
    if (!v) return p;
    const std::string text = v;
    const std::size_t colon = text.rfind(':');
    if (colon != std::string::npos) p.name = text.substr(0, colon);
    p.at = std::strtol(text.c_str() + (colon == std::string::npos ? 0 : colon + 1), nullptr, 10);
    return p;
  }();
  static std::atomic<long> writes{0};
  if (point.at <= 0 || (!point.name.empty() && path.filename() != point.name)) return false;
  return writes.fetch_add(1, std::memory_order_relaxed) + 1 == point.at;
}

void write_all(int fd, const std::filesystem::path& tmp, const char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write", tmp, errno);
    done += static_cast<std::size_t>(n);
  }
}

// The content into tmp, fsynced and closed.
void write_temporary(const std::filesystem::path& path, const std::filesystem::path& tmp, const std::string& content) {
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (f.fd < 0) fail("cannot create", tmp, errno);
  if (kill_point_reached(path)) {
    write_all(f.fd, tmp, content.data(), content.size() / 2);
    ::fsync(f.fd);
    std::raise(SIGKILL);
  }
  write_all(f.fd, tmp, content.data(), content.size());
  if (::fsync(f.fd) != 0) fail("cannot fsync", tmp, errno);
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) fail("cannot close", tmp, errno);
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  try {
    write_temporary(path, tmp, content);
  } catch (const OutputError&) {
    ::unlink(tmp.c_str());  // a full disk leaves no half-written file behind, not even a temporary one
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename onto", path, error);
  }
  fsync_directory(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
}


RunLog::RunLog(std::filesystem::path dir, std::size_t publish_every, std::string file_name)
    : dir_(std::move(dir)), publish_every_(publish_every == 0 ? 1 : publish_every), file_name_(std::move(file_name)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) fail("cannot create directory", dir_, ec.value());
  if (!std::filesystem::is_directory(dir_)) fail("cannot use as a directory", dir_, ENOTDIR);
}

RunLog::~RunLog() {
  try {
    flush();
  } catch (...) {  // a destructor must not throw; flush() reports the error to a caller who asks
  }
}

void RunLog::append(const nlohmann::json& step) {
  // dump() escapes newlines inside strings, so one step is one line.
  append_text(step.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void RunLog::append_text(std::string_view line) {
  content_ += line;
  content_ += '\n';
  ++appended_;
  if (appended_ - published_ >= publish_every_) flush();
}

void RunLog::flush() {
  if (published_ == appended_ && std::filesystem::exists(steps_path())) return;
  write_file_atomically(steps_path(), content_);
  published_ = appended_;
}

void RunLog::write_summary(const nlohmann::json& summary) { record::write_summary(dir_, summary); }

void write_summary(const std::filesystem::path& dir, const nlohmann::json& summary) {
  write_file_atomically(dir / "summary.json",
                        summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::vector<nlohmann::json> read_steps(const std::filesystem::path& dir) { return read_json_lines(dir / "steps.jsonl"); }

std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& path) {
  std::ifstream in = io::open_input_file(path, std::ios::in);
  if (!in) fail("cannot open", path, errno);
  std::vector<nlohmann::json> steps;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::string why;
    auto step = io::try_parse_json_text(line, &why);
    if (!step)
      throw std::runtime_error("run log: '" + path.string() + "' line " + std::to_string(number) + " is not JSON (" +
                               why + ")");
    steps.push_back(std::move(*step));
  }
  return steps;
}

}  // namespace mpverify::record
