// .npy: round trips through our writer, hand-assembled files in every
// accepted dtype and order, and corrupted headers (truncation at every length,
// huge shapes, wrong dtypes, bad syntax, seeded random byte flips), each of
// which must give io::FileError naming the file, the tensor and the offset.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/file_error.h"
#include "io/npy.h"

namespace {

using namespace mpverify;
namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("mpverify_io_npy_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write_raw(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An .npy v1 file assembled by hand: magic, version, header length, header, data.
std::string npy_file(const std::string& header, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major >= 2) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + data;
}

template <class T>
std::string le_bytes(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

TEST(Npy, RoundTripFloatAndDouble) {
  const fs::path d = temp_dir();
  const std::vector<float> f = {1.0f, -0x1p-149f, 65504.0f, std::numeric_limits<float>::infinity(), -0.0f, 0x1.fffffep127f};
  io::write_npy(d / "f.npy", f, {2, 3});
  const io::DoubleArray a = io::read_npy_f64(d / "f.npy");
  ASSERT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  ASSERT_EQ(a.values.size(), f.size());
  for (std::size_t i = 0; i < f.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint64_t>(a.values[i]), std::bit_cast<std::uint64_t>(static_cast<double>(f[i])));

  const std::vector<double> g = {0.1, -1e-300, 4.9e-324};
  io::write_npy(d / "g.npy", g, {3});
  const io::DoubleArray b = io::read_npy_f64(d / "g.npy");
  ASSERT_EQ(b.shape, (std::vector<std::size_t>{3}));
  EXPECT_EQ(b.values, g);

  io::write_npy(d / "scalar.npy", std::vector<double>{2.5}, {});
  EXPECT_EQ(io::read_npy_f64(d / "scalar.npy").values, std::vector<double>{2.5});
  io::write_npy(d / "empty.npy", std::vector<float>{}, {0, 4});
  const io::DoubleArray e = io::read_npy_f64(d / "empty.npy");
  EXPECT_EQ(e.shape, (std::vector<std::size_t>{0, 4}));
  EXPECT_TRUE(e.values.empty());
  EXPECT_FALSE(fs::exists(d / "f.npy.tmp"));
  fs::remove_all(d);
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  // np.save("x.npy", np.zeros(3, "<f4")) writes exactly this header: numpy
  // pads to a 64-byte boundary with spaces and ends with a newline, so the 10
  // bytes of magic/version/length plus 58 of dict need 128 bytes in all.
  std::string expected = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  expected.append(128 - 10 - expected.size() - 1, ' ');
  expected += '\n';
  const std::vector<float> v(3, 0.0f);
  const std::vector<std::byte> img = io::npy_image(v, {3});
  ASSERT_EQ(img.size(), 128u + 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(img.data()) + 10, 118), expected);
  EXPECT_EQ(static_cast<int>(img[8]), 118);
  std::vector<std::byte> img2 = io::npy_image(v, {1, 3});
  EXPECT_NE(std::string(reinterpret_cast<const char*>(img2.data()), img2.size()).find("'shape': (1, 3), }"),
            std::string::npos);
  EXPECT_THROW(io::npy_image(v, {2, 2}), std::invalid_argument);
}

TEST(Npy, EveryAcceptedDtype) {
  const fs::path d = temp_dir();
  // fp16: 1.0, -2.0, 2^-24 (smallest subnormal), 65504, inf
  write_raw(d / "h.npy", npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }\n",
                                  le_bytes<std::uint16_t>({0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00})));
  EXPECT_EQ(io::read_npy_f64(d / "h.npy").values,
            (std::vector<double>{1.0, -2.0, 0x1p-24, 65504.0, std::numeric_limits<double>::infinity()}));
  // bfloat16 as ml_dtypes stores it ('<V2'): 1.0, -0x1.fep127 (largest), 2^-133 (a subnormal)
  write_raw(d / "bf.npy", npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }\n",
                                   le_bytes<std::uint16_t>({0x3f80, 0xff7f, 0x0001})));
  EXPECT_EQ(io::read_npy_f64(d / "bf.npy").values, (std::vector<double>{1.0, -0x1.fep127, 0x1p-133}));
  // big-endian double 1.5 = 0x3FF8000000000000, written most significant byte first
  write_raw(d / "be.npy", npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (), }\n",
                                   std::string("\x3f\xf8\0\0\0\0\0\0", 8)));
  EXPECT_EQ(io::read_npy_f64(d / "be.npy").values, std::vector<double>{1.5});
  // Fortran order: the 2 x 3 matrix [[1,2,3],[4,5,6]] stored column by column
  write_raw(d / "fo.npy", npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n",
                                   le_bytes<float>({1, 4, 2, 5, 3, 6})));
  const io::DoubleArray fo = io::read_npy_f64(d / "fo.npy");
  EXPECT_EQ(fo.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(fo.values, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // Fortran order, 3-d: element (i, j, k) of shape (2, 2, 2) at i + 2j + 4k; value 100i + 10j + k
  std::vector<float> f3(8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) f3[static_cast<std::size_t>(i + 2 * j + 4 * k)] = static_cast<float>(100 * i + 10 * j + k);
  write_raw(d / "fo3.npy", npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2, 2), }\n", le_bytes(f3)));
  EXPECT_EQ(io::read_npy_f64(d / "fo3.npy").values, (std::vector<double>{0, 1, 10, 11, 100, 101, 110, 111}));
  // version 2 header, keys in another order, double quotes
  write_raw(d / "v2.npy", npy_file("{\"shape\": (1,), \"fortran_order\": False, \"descr\": \"<f4\"}", le_bytes<float>({7}), 2));
  EXPECT_EQ(io::read_npy_f64(d / "v2.npy").values, std::vector<double>{7});
  fs::remove_all(d);
}

// Throws FileError whose message contains the file name, `what` and "byte offset N".
void expect_file_error(const fs::path& p, const std::string& what, std::uint64_t offset) {
  try {
    io::read_npy_f64(p);
    ADD_FAILURE() << p << ": no error, expected: " << what;
  } catch (const io::FileError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p.string()), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_EQ(e.offset(), offset) << m;
    EXPECT_NE(m.find("byte offset " + std::to_string(offset)), std::string::npos) << m;
  }
}

TEST(Npy, CorruptedHeadersNameFileAndOffset) {
  const fs::path d = temp_dir();
  const std::string good_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::string data = le_bytes<float>({1, 2});
  const auto check = [&](const std::string& name, const std::string& bytes, const std::string& what, std::uint64_t at) {
    write_raw(d / name, bytes);
    expect_file_error(d / name, what, at);
  };
  check("magic.npy", std::string("\x92NUMPY\x01\x00\x02\x00{}", 12), "bad magic", 0);
  check("version.npy", npy_file(good_header, data, 4), "unsupported .npy version 4", 6);
  std::string long_len = npy_file(good_header, data);
  long_len[8] = '\xff';
  long_len[9] = '\xff';
  check("hlen.npy", long_len, "runs past the end", 8);
  check("dtype_int.npy", npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", data),
        "unsupported dtype '<i4'", 10);
  check("dtype_v1.npy", npy_file("{'descr': '|V1', 'fortran_order': False, 'shape': (8,), }\n", data),
        "unsupported dtype '|V1'", 10);
  check("dtype_f16.npy", npy_file("{'descr': '<f16', 'fortran_order': False, 'shape': (2,), }\n", data),
        "unsupported dtype '<f16'", 10);
  // huge shape: 2^62 * 4 bytes overflows; 10^6 elements do not fit in the file
  check("huge.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }\n", data),
        "overflows 64 bits", 10);
  check("hugedim.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", data),
        "dimension too large", 10 + 51);
  check("short.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }\n", data),
        "data needs 4000000 bytes but only 8 follow", 10 + good_header.size() + 6);
  check("negative.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n", data),
        "expected a non-negative dimension", 10 + 51);
  check("trailing.npy", npy_file(good_header, data + "xx"), "2 bytes after the array's data", 10 + good_header.size() + 8);
  check("nokey.npy", npy_file("{'descr': '<f4', 'shape': (2,), }\n", data), "no 'fortran_order'", 10);
  check("badkey.npy", npy_file("{'descr': '<f4', 'order': False, 'shape': (2,), }\n", data), "unexpected key 'order'",
        10 + 17);
  check("unterminated.npy", npy_file("{'descr': '<f4", data), "unterminated string", 10 + 10);
  check("nobool.npy", npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }\n", data),
        "expected True or False", 10 + 34);
  check("empty.npy", "", "too short for an .npy header (0 bytes", 0);
  expect_file_error(d / "missing.npy", "cannot open", 0);
  fs::remove_all(d);
}

TEST(Npy, EveryTruncationIsAnError) {
  const fs::path d = temp_dir();
  const std::vector<float> v = {1, 2, 3, 4, 5};
  const std::vector<std::byte> img = io::npy_image(v, {5});
  int errors = 0;
  for (std::size_t n = 0; n < img.size(); ++n) {
    write_raw(d / "t.npy", std::string(reinterpret_cast<const char*>(img.data()), n));
    EXPECT_THROW(io::read_npy_f64(d / "t.npy"), io::FileError) << "prefix of " << n << " bytes";
    ++errors;
  }
  EXPECT_EQ(errors, static_cast<int>(img.size()));
  fs::remove_all(d);
}

TEST(Npy, RandomHeaderMutationsNeverReadOutOfBounds) {
  // Seeded byte flips in the header: each file either parses to a tensor whose
  // data lies inside the file and whose size matches its shape, or gives a
  // FileError; anything else (another exception, a crash) fails.
  const fs::path d = temp_dir();
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const std::vector<std::byte> img = io::npy_image(v, {2, 3});
  std::mt19937_64 rng(20261122);
  int parsed = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::byte> m = img;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) m[rng() % 64] = static_cast<std::byte>(rng() & 0xff);
    try {
      const io::TensorEntry e = io::parse_npy(m, "mutant.npy", "mutant");
      EXPECT_GE(e.data.data(), m.data());
      EXPECT_LE(e.data.data() + e.data.size(), m.data() + m.size());
      EXPECT_EQ(e.data.size(), e.count * io::element_size(e.dtype));
      ++parsed;
    } catch (const io::FileError& e) {
      EXPECT_NE(std::string(e.what()).find("mutant.npy"), std::string::npos);
      EXPECT_LE(e.offset(), m.size());
      ++rejected;
    }
  }
  EXPECT_EQ(parsed + rejected, 3000);
  EXPECT_GT(rejected, 1000);  // most flips land in the magic, length, or the dict's syntax
  fs::remove_all(d);
}

}  // namespace
