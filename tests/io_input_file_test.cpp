// The one way inputs are opened (io/input_file.h): a FIFO, a device or a directory where a file is expected
// is refused by name, at once. Before, a FIFO named like an input (steps.jsonl, summary.json, step.json, an
// .npz) made the reader wait for a writer forever, and a link to /dev/zero was read until memory ran out.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "io/file_error.h"
#include "io/input_file.h"
#include "io/json_text.h"
#include "io/mapped_file.h"
#include "io/npz.h"
#include "record/run_log.h"

namespace {

namespace fs = std::filesystem;

class HostileNames : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mpverify-input-file-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path fifo(const std::string& name) {
    const fs::path p = dir_ / name;
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }
  fs::path link_to(const std::string& name, const fs::path& target) {
    const fs::path p = dir_ / name;
    fs::create_symlink(target, p);
    return p;
  }
  fs::path dir_;
};

// The error a reader throws, or "" when it read something.
std::string refusal(const std::function<void()>& read) {
  try {
    read();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST_F(HostileNames, AFifoIsRefusedByEveryReaderWithoutWaiting) {
  const fs::path json = fifo("summary.json"), lines = fifo("steps.jsonl"), npz = fifo("seed-9.npz");
  const std::string a = refusal([&] { mpverify::io::read_json_file(json); });
  EXPECT_NE(a.find("summary.json: is a FIFO (named pipe), not a regular file"), std::string::npos) << a;
  const std::string b = refusal([&] { mpverify::record::read_json_lines(lines); });
  EXPECT_NE(b.find("steps.jsonl: is a FIFO"), std::string::npos) << b;
  const std::string c = refusal([&] { mpverify::io::MappedFile m(npz); });
  EXPECT_NE(c.find("is a FIFO"), std::string::npos) << c;
  EXPECT_NE(c.find("seed-9.npz"), std::string::npos) << c;
  const std::string d = refusal([&] { mpverify::io::read_npz(npz); });
  EXPECT_NE(d.find("is a FIFO"), std::string::npos) << d;
}

TEST_F(HostileNames, ALinkToADeviceIsRefusedALinkToAFileIsFollowed) {
  const fs::path zero = link_to("step.json", "/dev/zero");
  const std::string a = refusal([&] { mpverify::io::read_json_file(zero); });
  EXPECT_NE(a.find("step.json: is a character device"), std::string::npos) << a;
  const std::string b = refusal([&] { mpverify::io::MappedFile m(zero); });
  EXPECT_NE(b.find("is a character device"), std::string::npos) << b;
  std::ofstream(dir_ / "real.json") << "{\"a\": 1}\n";
  const fs::path good = link_to("linked.json", dir_ / "real.json");
  EXPECT_EQ(mpverify::io::read_json_file(good)["a"], 1);
  const std::string c = refusal([&] { mpverify::io::read_json_file(dir_); });
  EXPECT_NE(c.find("is a directory"), std::string::npos) << c;
  EXPECT_EQ(mpverify::io::not_a_regular_file(dir_ / "missing.json"), "");  // the open reports a missing file
}

}  // namespace
