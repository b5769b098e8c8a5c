// .npz: stored and deflated archives written by our writer read back exactly;
// the directory walker; corrupted archives (every truncation, flipped bytes in
// the compressed data, size lies, overlapping members) give io::FileError.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/dtype.h"
#include "io/file_error.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/npz_write.h"
#include "io/tensor_directory.h"
#include "io/tensor_file.h"
#include "io/zip_archive.h"

namespace {

using namespace mpverify;
namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("mpverify_io_npz_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::vector<float> decoded(const io::TensorEntry& e) {
  std::vector<float> v(e.count);
  io::decode_floats(e.dtype, e.big_endian, e.data.data(), v);
  return v;
}

const std::vector<io::NpzArray> arrays = {{"w", {2, 3}, {1, 2, 3, 4, 5, 6}},
                                          {"grad/b", {4}, {0x1p-30f, -0x1p-20f, 0, 1e30f}},
                                          {"zeros", {1000}, std::vector<float>(1000, 0.0f)}};

TEST(Npz, StoredAndDeflatedRoundTrip) {
  const fs::path d = temp_dir();
  for (const bool compressed : {false, true}) {
    const fs::path p = d / (compressed ? "c.npz" : "s.npz");
    io::write_npz(p, arrays, compressed);
    const io::TensorFile f = io::open_tensor_file(p);
    ASSERT_EQ(f.tensors.size(), arrays.size());
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      EXPECT_EQ(f.tensors[i].name, arrays[i].name);
      EXPECT_EQ(decoded(f.tensors[i]), arrays[i].values);
    }
    EXPECT_EQ(f.buffers.size(), compressed ? arrays.size() : 0u);  // stored members are read from the mapping
  }
  // 1000 zeros deflate to far fewer bytes than 4000.
  EXPECT_LT(fs::file_size(d / "c.npz"), fs::file_size(d / "s.npz") / 2);
  fs::remove_all(d);
}

TEST(Npz, DirectoryWalkerFindsTensorFilesSorted) {
  const fs::path d = temp_dir();
  fs::create_directories(d / "step-2");
  fs::create_directories(d / "step-1");
  io::write_npz(d / "step-2" / "g.npz", arrays, false);
  io::write_npy(d / "step-1" / "w.npy", std::vector<float>{1}, {1});
  io::write_npy(d / "a.npy", std::vector<float>{1}, {1});
  std::ofstream(d / "notes.txt") << "not a tensor";
  const std::vector<io::FoundFile> found = io::find_tensor_files(d);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].relative, "a.npy");
  EXPECT_EQ(found[1].relative, "step-1/w.npy");
  EXPECT_EQ(found[2].relative, "step-2/g.npz");
  EXPECT_EQ(io::find_tensor_files(d / "a.npy").size(), 1u);
  EXPECT_THROW(io::find_tensor_files(d / "nothing"), io::FileError);
  EXPECT_THROW(io::open_tensor_file(d / "notes.txt"), io::FileError);
  fs::remove_all(d);
}

std::vector<std::byte> image(bool compressed) {
  std::vector<io::ZipInput> members;
  for (const io::NpzArray& a : arrays) members.push_back({a.name + ".npy", io::npy_image(a.values, a.shape)});
  return io::zip_image(members, compressed);
}

// Reads every member as read_npz does; FileError on any problem.
void read_all(std::span<const std::byte> bytes) {
  for (const io::ZipMember& m : io::zip_members(bytes, "x.npz")) {
    std::vector<std::byte> storage;
    const std::span<const std::byte> data = io::zip_member_data(bytes, m, "x.npz", storage);
    io::parse_npy(data, "x.npz", m.name);
  }
}

TEST(Npz, EveryTruncationIsAnError) {
  for (const bool compressed : {false, true}) {
    const std::vector<std::byte> img = image(compressed);
    int errors = 0;
    for (std::size_t n = 0; n < img.size(); ++n) {
      try {
        read_all(std::span<const std::byte>(img.data(), n));
      } catch (const io::FileError& e) {
        EXPECT_LE(e.offset(), n);
        ++errors;
      }
    }
    EXPECT_EQ(errors, static_cast<int>(img.size())) << (compressed ? "deflated" : "stored");
  }
}

TEST(Npz, CorruptedMembersAndHeaders) {
  // A flipped byte in the middle of the deflated data: inflate fails or the CRC differs.
  std::vector<std::byte> img = image(true);
  const std::vector<io::ZipMember> members = io::zip_members(img, "x.npz");
  ASSERT_EQ(members.size(), 3u);
  std::vector<std::byte> flipped = img;
  flipped[members[0].data_offset + members[0].compressed_size / 2] ^= std::byte{0x10};
  EXPECT_THROW(read_all(flipped), io::FileError);
  // A flipped byte in stored data: only the CRC can tell.
  std::vector<std::byte> stored = image(false);
  const std::vector<io::ZipMember> sm = io::zip_members(stored, "x.npz");
  stored[sm[0].data_offset + sm[0].compressed_size - 1] ^= std::byte{1};
  try {
    read_all(stored);
    ADD_FAILURE() << "no error";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("CRC-32 mismatch"), std::string::npos) << e.what();
    EXPECT_EQ(e.tensor(), "w.npy");
    EXPECT_EQ(e.offset(), sm[0].data_offset);
  }
  // The central directory's uncompressed size of member 0 claims 2^31 bytes.
  std::vector<std::byte> lie = img;
  std::uint64_t cd = 0;
  for (std::size_t i = 0; i + 4 <= lie.size(); ++i)
    if (lie[i] == std::byte{0x50} && lie[i + 1] == std::byte{0x4b} && lie[i + 2] == std::byte{1} && lie[i + 3] == std::byte{2}) {
      cd = i;
      break;
    }
  ASSERT_GT(cd, 0u);
  lie[cd + 27] = std::byte{0x80};
  try {
    read_all(lie);
    ADD_FAILURE() << "no error";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("more than deflate can expand"), std::string::npos) << e.what();
  }
  // Member 1's central entry pointed at member 0's local header: the two overlap.
  std::vector<std::byte> overlap = image(false);
  std::vector<std::size_t> entries;
  for (std::size_t i = 0; i + 4 <= overlap.size(); ++i)
    if (overlap[i] == std::byte{0x50} && overlap[i + 1] == std::byte{0x4b} && overlap[i + 2] == std::byte{1} &&
        overlap[i + 3] == std::byte{2})
      entries.push_back(i);
  ASSERT_EQ(entries.size(), 3u);
  for (int k = 0; k < 4; ++k) overlap[entries[1] + 42 + static_cast<std::size_t>(k)] = std::byte{0};
  EXPECT_THROW(io::zip_members(overlap, "x.npz"), io::FileError);
  // Not a zip at all.
  const std::vector<std::byte> junk(100, std::byte{0x41});
  try {
    io::zip_members(junk, "junk.npz");
    ADD_FAILURE() << "no error";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("no end-of-central-directory record"), std::string::npos);
  }
}

TEST(Npz, RandomMutationsNeverReadOutOfBounds) {
  std::mt19937_64 rng(11);
  const std::vector<std::byte> img = image(true);
  int parsed = 0, rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::byte> m = img;
    for (int k = 0; k < 2; ++k) m[rng() % m.size()] = static_cast<std::byte>(rng() & 0xff);
    try {
      read_all(m);
      ++parsed;
    } catch (const io::FileError& e) {
      EXPECT_LE(e.offset(), m.size());
      ++rejected;
    }
  }
  EXPECT_EQ(parsed + rejected, 2000);
  EXPECT_GT(rejected, 100);
}

}  // namespace

namespace {

TEST(Npz, IntegerAndBooleanMembersAreSkippedNotRefused) {
  // `mpverify quantize` writes float32 values beside uint8 codes: the float member must still be readable.
  const fs::path file = temp_dir() / "mixed.npz";
  const std::vector<float> values{1.5f, -2.0f, 0.25f};
  const std::vector<std::uint8_t> codes{0x3C, 0xC0, 0x28};
  io::write_npz_members(file, {{"values", io::npy_image(std::span<const float>(values), {3})},
                               {"codes", io::npy_image(std::span<const std::uint8_t>(codes), {3})}});
  const io::TensorFile f = io::read_npz(file);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].name, "values");
  ASSERT_EQ(f.skipped.size(), 1u);
  EXPECT_EQ(f.skipped[0], "codes (|u1)");
  // A lone .npy of integers is still refused, with the dtype named.
  const fs::path npy = temp_dir() / "codes.npy";
  const std::vector<std::byte> image = io::npy_image(std::span<const std::uint8_t>(codes), {3});
  std::ofstream(npy, std::ios::binary).write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()));
  try {
    (void)io::open_tensor_file(npy);
    ADD_FAILURE() << "an integer .npy was read";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported dtype '|u1'"), std::string::npos) << e.what();
  }
  fs::remove_all(temp_dir());
}

}  // namespace
