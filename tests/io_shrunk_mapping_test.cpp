// A memory-mapped input truncated by another process while it is read (io/shrunk_mapping.h): the program
// ends with exit code 2 and a line naming the file, where it once died of SIGBUS (`quantize` in 4 of 4
// tries, `analyze` in 2 of 5 when a writer truncated its input). A death test: the child maps the file,
// truncates it as the other process would, and reads past the new end.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/mapped_file.h"
#include "io/shrunk_mapping.h"

namespace {

namespace fs = std::filesystem;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MPVERIFY_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MPVERIFY_UNDER_ASAN 1
#endif

fs::path file_of(std::size_t bytes, const std::string& name) {
  const fs::path p = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".bin");
  std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
  return p;
}

// Reads every byte, as a reader of the mapping does.
int sum_of(const mpverify::io::MappedFile& m) {
  int sum = 0;
  for (const std::byte b : m.bytes()) sum += static_cast<int>(b);
  return sum;
}

TEST(ShrunkMappingDeathTest, ATruncatedInputEndsTheProgramWithExitTwoNamingIt) {
#ifdef MPVERIFY_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer takes SIGBUS for its own report in this build";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path p = file_of(1 << 20, "mpverify-shrinking");
  EXPECT_EXIT(
      {
        mpverify::io::exit_on_shrunk_mapping();
        const mpverify::io::MappedFile m(p);
        if (::truncate(p.c_str(), 0) != 0) std::exit(3);
        std::exit(sum_of(m) == 0 ? 4 : 5);  // never reached: the read past the new end faults
      },
      // The threadsafe style runs the child as a new process: its file name holds its own pid.
      ::testing::ExitedWithCode(2), "mpverify: error: .*mpverify-shrinking-[0-9]+\\.bin: the file shrank while it was "
                                    "being read");
  fs::remove(p);
}

TEST(ShrunkMapping, AFileReadWholeIsUntouchedByTheHandler) {
  const fs::path p = file_of(3 * 4096 + 5, "mpverify-whole");
  mpverify::io::exit_on_shrunk_mapping();
  {
    const mpverify::io::MappedFile m(p);
    EXPECT_EQ(sum_of(m), static_cast<int>('x') * (3 * 4096 + 5));
  }
  fs::remove(p);
}

}  // namespace
