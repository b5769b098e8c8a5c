// write_npz_members: an .npz of float32 and uint8 arrays. Read back with the
// library's zip and .npy readers (float members; the uint8 member's bytes by
// hand, since the tensor readers take floating-point types only), with
// read_npz when every member is float, and refused for duplicate names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/dtype.h"
#include "io/mapped_file.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/npz_write.h"
#include "io/tensor_file.h"
#include "io/zip_archive.h"

namespace {

using namespace mpverify;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("mpverify_io_npz_write_" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<float> decoded(const io::TensorEntry& e) {
  std::vector<float> v(e.count);
  io::decode_floats(e.dtype, e.big_endian, e.data.data(), v);
  return v;
}

TEST(NpzWrite, FloatAndUint8MembersReadBack) {
  TempDir d;
  const fs::path p = d.path / "q.npz";
  const std::vector<float> values = {1.5f, -0x1p-20f, 0.0f, 448.0f, 6.0f, -2.0f};
  const std::vector<std::uint8_t> codes = {0x00, 0x7e, 0xff, 0x80, 0x01, 0x38};
  io::write_npz_members(p, {{"values", io::npy_image(std::span<const float>(values), {2, 3})},
                            {"codes", io::npy_image(std::span<const std::uint8_t>(codes), {2, 3})}});
  EXPECT_FALSE(fs::exists(d.path / "q.npz.tmp"));
  const io::MappedFile m(p);
  const std::vector<io::ZipMember> members = io::zip_members(m.bytes(), p);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].name, "values.npy");
  EXPECT_EQ(members[1].name, "codes.npy");
  EXPECT_EQ(members[0].method, 0);  // stored
  std::vector<std::byte> storage;
  const io::TensorEntry e = io::parse_npy(io::zip_member_data(m.bytes(), members[0], p, storage), p, "values");
  EXPECT_EQ(e.shape, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(decoded(e), values);
  const std::span<const std::byte> c = io::zip_member_data(m.bytes(), members[1], p, storage);
  ASSERT_GT(c.size(), 10u);
  const std::size_t data_at = 10 + (static_cast<std::size_t>(c[8]) | static_cast<std::size_t>(c[9]) << 8);
  EXPECT_EQ(data_at % 64, 0u);  // numpy pads the header so that the data is aligned
  const std::string header(reinterpret_cast<const char*>(c.data()), std::min(data_at, c.size()));
  EXPECT_NE(header.find("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos) << header;
  ASSERT_EQ(c.size(), data_at + codes.size());
  EXPECT_EQ(std::memcmp(c.data() + data_at, codes.data(), codes.size()), 0);
}

TEST(NpzWrite, FloatMembersReadByReadNpz) {
  TempDir d;
  const fs::path p = d.path / "f.npz";
  const std::vector<float> a = {1, 2, 3, 4}, s = {0.25f};
  io::write_npz_members(p, {{"a", io::npy_image(std::span<const float>(a), {4})},
                            {"s", io::npy_image(std::span<const float>(s), {1})}});
  const io::TensorFile f = io::open_tensor_file(p);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(decoded(f.tensors[0]), a);
  EXPECT_EQ(f.tensors[1].name, "s");
  EXPECT_EQ(decoded(f.tensors[1]), s);
}

TEST(NpzWrite, DuplicateNamesAreRefusedAndNothingIsWritten) {
  TempDir d;
  const fs::path p = d.path / "dup.npz";
  const std::vector<float> a = {1};
  const std::vector<std::byte> image = io::npy_image(std::span<const float>(a), {1});
  EXPECT_THROW(io::write_npz_members(p, {{"a", image}, {"a", image}}), std::invalid_argument);
  EXPECT_FALSE(fs::exists(p));
}

}  // namespace
