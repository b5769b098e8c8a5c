// SHA-256 against FIPS 180-4's published examples and against coreutils'
// sha256sum on a file longer than one read buffer.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/file_error.h"
#include "io/sha256.h"
#include "support/run_command.h"

namespace {

std::string hex_of(const std::string& text) {
  return mpverify::io::sha256_hex({reinterpret_cast<const unsigned char*>(text.data()), text.size()});
}

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding needs a second block.
  EXPECT_EQ(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FileEqualsCoreutils) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "mpverify-sha256-test.bin";
  std::vector<unsigned char> bytes(200001);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>((i * 7919u) >> 3);
  std::FILE* f = std::fopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  const auto r = mpverify::test::run_command("sha256sum " + file.string(), "");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(mpverify::io::sha256_file_hex(file), r.out.substr(0, 64));
  EXPECT_EQ(mpverify::io::sha256_hex(bytes), r.out.substr(0, 64));
  std::filesystem::remove(file);
  EXPECT_THROW(mpverify::io::sha256_file_hex(file), mpverify::io::FileError);
}

}  // namespace
