// safetensors: round trips through our writer, a hand-assembled file with
// every float dtype (decoded values worked out by hand), and corrupted
// headers: each must give io::FileError naming the file, tensor and offset.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/dtype.h"
#include "io/file_error.h"
#include "io/safetensors.h"

namespace {

using namespace mpverify;
namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("mpverify_io_st_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// 8-byte little-endian length, the header text, the data.
std::string st_file(const std::string& header, const std::string& data) {
  std::string out;
  for (int k = 0; k < 8; ++k) out += static_cast<char>((header.size() >> (8 * k)) & 0xff);
  return out + header + data;
}

void write_raw(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<double> decoded(const io::TensorEntry& e) {
  std::vector<double> v(e.count);
  io::decode_doubles(e.dtype, false, e.data.data(), v);
  return v;
}

TEST(Safetensors, RoundTrip) {
  const fs::path d = temp_dir();
  const std::vector<io::FloatTensor> in = {
      {"layer.0.weight", {2, 3}, {1, -2, 0x1p-149f, 65504, -0.0f, std::numeric_limits<float>::infinity()}},
      {"bias", {3}, {0.5f, 0.25f, 0.125f}},
      {"scalar", {}, {3}},
      {"empty", {0}, {}}};
  io::write_safetensors(d / "m.safetensors", in, {{"format", "pt"}});
  EXPECT_FALSE(fs::exists(d / "m.safetensors.tmp"));
  // The header length is a multiple of 8, so the data is 8-byte aligned.
  std::ifstream f(d / "m.safetensors", std::ios::binary);
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  EXPECT_EQ(len[0] % 8, 0);
  const std::vector<io::FloatTensor> out = io::read_safetensors_f32(d / "m.safetensors");
  ASSERT_EQ(out.size(), in.size());  // in data-offset order, which is the written order
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].name, in[i].name);
    EXPECT_EQ(out[i].shape, in[i].shape);
    ASSERT_EQ(out[i].values.size(), in[i].values.size());
    for (std::size_t j = 0; j < in[i].values.size(); ++j)
      EXPECT_EQ(std::memcmp(&out[i].values[j], &in[i].values[j], 4), 0) << in[i].name << "[" << j << "]";
  }
  EXPECT_THROW(io::write_safetensors(d / "x.safetensors", {{"a", {2}, {1}}}), std::invalid_argument);
  EXPECT_THROW(io::write_safetensors(d / "x.safetensors", {{"a", {1}, {1}}, {"a", {1}, {1}}}), std::invalid_argument);
  EXPECT_FALSE(fs::exists(d / "x.safetensors"));
  fs::remove_all(d);
}

TEST(Safetensors, EveryFloatDtypeAndSkippedIntegers) {
  const fs::path d = temp_dir();
  std::string data;
  const auto u16 = [&](std::uint16_t v) { data += static_cast<char>(v & 0xff); data += static_cast<char>(v >> 8); };
  u16(0x3c00); u16(0x0001);  // F16: 1, 2^-24                      [0, 4)
  u16(0xbf80); u16(0x7f7f);  // BF16: -1, 0x1.fep127               [4, 8)
  data += '\x7e'; data += '\x01'; data += '\x7f';  // E4M3: 448, 2^-9, NaN   [8, 11)
  data += '\x7b'; data += '\x01'; data += '\x7c';  // E5M2: 57344, 2^-16, inf [11, 14)
  data += std::string("\0\0\0\0\0\0\xf8\x3f", 8);  // F64: 1.5       [14, 22)
  data += std::string(8, '\0');                    // I64: skipped   [22, 30)
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},)"
      R"("e4":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[8,11]},)"
      R"("e5":{"dtype":"F8_E5M2","shape":[3],"data_offsets":[11,14]},)"
      R"("d":{"dtype":"F64","shape":[],"data_offsets":[14,22]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[22,30]},"__metadata__":{"a":"b"}})";
  write_raw(d / "all.safetensors", st_file(header, data));
  const io::TensorFile f = io::read_safetensors(d / "all.safetensors");
  ASSERT_EQ(f.tensors.size(), 5u);
  EXPECT_EQ(f.skipped, std::vector<std::string>{"i (I64)"});
  EXPECT_EQ(f.tensors[0].name, "h");
  EXPECT_EQ(decoded(f.tensors[0]), (std::vector<double>{1.0, 0x1p-24}));
  EXPECT_EQ(decoded(f.tensors[1]), (std::vector<double>{-1.0, 0x1.fep127}));
  const std::vector<double> e4 = decoded(f.tensors[2]);
  EXPECT_EQ(e4[0], 448.0);
  EXPECT_EQ(e4[1], 0x1p-9);
  EXPECT_TRUE(std::isnan(e4[2]));
  EXPECT_EQ(decoded(f.tensors[3]), (std::vector<double>{57344.0, 0x1p-16, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(decoded(f.tensors[4]), std::vector<double>{1.5});
  EXPECT_EQ(f.tensors[4].data_offset, 8 + header.size() + 14);
  EXPECT_THROW(io::read_safetensors_f32(d / "all.safetensors"), io::FileError);  // F64 is not read as float
  fs::remove_all(d);
}

TEST(Safetensors, CorruptedHeaders) {
  const fs::path d = temp_dir();
  const std::string data(16, '\0');
  const auto check = [&](const std::string& name, const std::string& bytes, const std::string& tensor,
                         const std::string& what, std::uint64_t offset) {
    write_raw(d / name, bytes);
    try {
      io::read_safetensors(d / name);
      ADD_FAILURE() << name << ": no error";
    } catch (const io::FileError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find((d / name).string()), std::string::npos) << m;
      EXPECT_EQ(e.tensor(), tensor) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
      EXPECT_EQ(e.offset(), offset) << m;
    }
  };
  const auto entry = [](const std::string& body) { return "{\"t\":" + body + "}"; };
  check("short.safetensors", "abc", "", "too short", 0);
  std::string huge_len = st_file("{}", "");
  huge_len[7] = '\x7f';
  check("hlen.safetensors", huge_len, "", "runs past the end", 0);
  check("json.safetensors", st_file("{\"t\": [", data), "", "not valid JSON", 8 + 7);
  check("array.safetensors", st_file("[1,2]", data), "", "not a JSON object", 8);
  const std::string h_dtype = entry(R"({"dtype":"F17","shape":[4],"data_offsets":[0,16]})");
  check("dtype.safetensors", st_file(h_dtype, data), "t", "unknown dtype 'F17'", 8 + 1);
  check("dtype_num.safetensors", st_file(entry(R"({"dtype":3,"shape":[4],"data_offsets":[0,16]})"), data), "t",
        "no 'dtype' string", 9);
  check("neg_offset.safetensors", st_file(entry(R"({"dtype":"F32","shape":[4],"data_offsets":[-4,12]})"), data), "t",
        "not non-negative integers", 9);
  check("reversed.safetensors", st_file(entry(R"({"dtype":"F32","shape":[0],"data_offsets":[8,4]})"), data), "t",
        "begin 8 > end 4", 9);
  const std::string h_past = entry(R"({"dtype":"F32","shape":[8],"data_offsets":[0,32]})");
  check("past.safetensors", st_file(h_past, data), "t", "past the data's 16 bytes", 9);  // the offset of the entry that says so
  const std::string h_size = entry(R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})");
  check("size.safetensors", st_file(h_size, data), "t", "shape needs 12", 8 + h_size.size());
  check("neg_shape.safetensors", st_file(entry(R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})"), data), "t",
        "not a non-negative integer", 9);
  check("huge_shape.safetensors",
        st_file(entry(R"({"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,16]})"), data), "t",
        "overflows 64 bits", 9);
  const std::string h_overlap =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  check("overlap.safetensors", st_file(h_overlap, data), "b", "overlaps tensor 'a'", 8 + h_overlap.size() + 4);
  check("meta.safetensors", st_file(R"({"__metadata__":{"k":1}})", data), "", "is not a string", 8 + 17);
  fs::remove_all(d);
}

// Hostile headers that once crashed or stalled a reader: each gives a FileError (or reads correctly) at once.
TEST(Safetensors, HostileHeadersAreBounded) {
  const fs::path d = temp_dir();
  const auto error_of = [&](const std::string& name, const std::string& bytes) -> std::string {
    write_raw(d / name, bytes);
    try {
      io::read_safetensors(d / name);
    } catch (const io::FileError& e) {
      return e.what();
    }
    return "no error";
  };
  // Nested 53,000 arrays deep (106 KB): a stack overflow in whatever recursed over the parsed value.
  const std::string deep = "{\"t\":" + std::string(53000, '[') + std::string(53000, ']') + "}";
  EXPECT_NE(error_of("deep.safetensors", st_file(deep, "")).find("nested deeper than 64 levels"), std::string::npos);
  // A number beyond double's range: nlohmann raises out_of_range, which must not escape as another type.
  const std::string big = R"({"__metadata__":{"k":"v"},"t":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})";
  EXPECT_NE(error_of("big.safetensors", st_file(big, std::string(4, '\0'))).find("not valid JSON"), std::string::npos);
  // 40,000 tensors (a 2.4 MB header): read in one pass; once searched the header per tensor (quadratic: minutes).
  std::string many = "{";
  for (int i = 0; i < 40000; ++i) {
    if (i > 0) many += ',';
    many += "\"t";
    many += std::to_string(i);
    many += R"(":{"dtype":"F32","shape":[1],"data_offsets":[)";
    many += std::to_string(4 * i);
    many += ',';
    many += std::to_string(4 * i + 4);
    many += "]}";
  }
  many += "}";
  write_raw(d / "many.safetensors", st_file(many, std::string(4 * 40000, '\0')));
  EXPECT_EQ(io::read_safetensors(d / "many.safetensors").tensors.size(), 40000u);
  // A tensor of no elements: its data is an empty span (a null pointer), decoded without touching it.
  write_raw(d / "empty.safetensors", st_file(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", ""));
  const auto floats = io::read_safetensors_f32(d / "empty.safetensors");
  ASSERT_EQ(floats.size(), 1u);
  EXPECT_TRUE(floats[0].values.empty());
  fs::remove_all(d);
}

TEST(Safetensors, TruncationsAndMutationsNeverReadOutOfBounds) {
  const fs::path d = temp_dir();
  io::write_safetensors(d / "g.safetensors", {{"w", {2, 2}, {1, 2, 3, 4}}, {"b", {2}, {5, 6}}});
  std::ifstream in(d / "g.safetensors", std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::size_t n = 0; n < good.size(); ++n) {
    io::TensorFile f;
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(good.data()), n);
    EXPECT_THROW(io::parse_safetensors(bytes, "trunc.safetensors", f), io::FileError) << n << " bytes";
  }
  std::mt19937_64 rng(7);
  int parsed = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string m = good;
    m[rng() % (m.size() - 24)] = static_cast<char>(rng() & 0xff);  // anywhere in the length or the header
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(m.data()), m.size());
    io::TensorFile f;
    try {
      io::parse_safetensors(bytes, "mutant.safetensors", f);
      for (const io::TensorEntry& e : f.tensors) {
        EXPECT_GE(e.data.data(), bytes.data());
        EXPECT_LE(e.data.data() + e.data.size(), bytes.data() + bytes.size());
        EXPECT_EQ(e.data.size(), e.count * io::element_size(e.dtype));
      }
      ++parsed;
    } catch (const io::FileError& e) {
      EXPECT_LE(e.offset(), m.size());
      ++rejected;
    }
  }
  EXPECT_EQ(parsed + rejected, 3000);
  EXPECT_GT(rejected, 500);
  fs::remove_all(d);
}

}  // namespace
