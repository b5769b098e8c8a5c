#include "io/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "io/file_error.h"

namespace mpverify::io {

namespace {

constexpr std::uint32_t sig_local = 0x04034b50;
constexpr std::uint32_t sig_central = 0x02014b50;
constexpr std::uint32_t sig_eocd = 0x06054b50;
constexpr std::uint32_t sig_zip64_eocd = 0x06064b50;
constexpr std::uint32_t sig_zip64_locator = 0x07064b50;

std::uint64_t le(const std::byte* p, int n) {
  std::uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<std::uint8_t>(p[k]);
  return v;
}

void put(std::vector<std::byte>& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) out.push_back(static_cast<std::byte>((v >> (8 * k)) & 0xff));
}

std::uint32_t crc_of(std::span<const std::byte> data) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const std::size_t step = std::numeric_limits<uInt>::max() / 2;
  for (std::size_t i = 0; i < data.size(); i += step) {
    const std::size_t n = std::min(step, data.size() - i);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(data.data() + i), static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace

std::vector<ZipMember> zip_members(std::span<const std::byte> bytes, const std::filesystem::path& file) {
  const std::uint64_t size = bytes.size();
  const std::byte* b = bytes.data();
  const auto fail = [&](std::uint64_t at, const std::string& why, const std::string& member = "") {
    return FileError(file, member, at, why);
  };
  if (size < 22) throw fail(0, "too short for a zip archive (" + std::to_string(size) + " bytes)");
  // The end-of-central-directory record: 22 bytes plus a comment of up to 65535.
  std::uint64_t eocd = size;
  for (std::uint64_t at = size - 22 + 1; at-- > 0 && size - at <= 22 + 65535;) {
    if (le(b + at, 4) == sig_eocd && at + 22 + le(b + at + 20, 2) == size) { eocd = at; break; }
  }
  if (eocd == size) throw fail(size, "no end-of-central-directory record (not a zip archive, or truncated)");
  std::uint64_t entries = le(b + eocd + 10, 2);
  std::uint64_t cd_size = le(b + eocd + 12, 4);
  std::uint64_t cd_offset = le(b + eocd + 16, 4);
  std::uint64_t cd_end_limit = eocd;
  if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    if (eocd < 20 || le(b + eocd - 20, 4) != sig_zip64_locator)
      throw fail(eocd, "zip64 values in the end record but no zip64 locator");
    const std::uint64_t rec = le(b + eocd - 20 + 8, 8);
    if (rec > eocd - 20 || eocd - 20 - rec < 56 || le(b + rec, 4) != sig_zip64_eocd)
      throw fail(eocd - 20, "zip64 locator points outside the archive or at no zip64 end record");
    entries = le(b + rec + 32, 8);
    cd_size = le(b + rec + 40, 8);
    cd_offset = le(b + rec + 48, 8);
    cd_end_limit = rec;
  }
  if (cd_offset > cd_end_limit || cd_size > cd_end_limit - cd_offset)
    throw fail(eocd, "central directory (offset " + std::to_string(cd_offset) + ", " + std::to_string(cd_size) +
                         " bytes) lies outside the archive");
  if (entries > cd_size / 46) throw fail(eocd, std::to_string(entries) + " entries cannot fit the central directory");

  std::vector<ZipMember> out;
  std::uint64_t at = cd_offset;
  const std::uint64_t cd_end = cd_offset + cd_size;
  for (std::uint64_t i = 0; i < entries; ++i) {
    if (cd_end - at < 46 || le(b + at, 4) != sig_central) throw fail(at, "bad central directory entry");
    ZipMember m;
    const std::uint64_t flags = le(b + at + 8, 2);
    m.method = static_cast<std::uint16_t>(le(b + at + 10, 2));
    m.crc32 = static_cast<std::uint32_t>(le(b + at + 16, 4));
    m.compressed_size = le(b + at + 20, 4);
    m.uncompressed_size = le(b + at + 24, 4);
    const std::uint64_t name_len = le(b + at + 28, 2), extra_len = le(b + at + 30, 2), comment_len = le(b + at + 32, 2);
    std::uint64_t local = le(b + at + 42, 4);
    if (46 + name_len + extra_len + comment_len > cd_end - at) throw fail(at, "central directory entry runs past its end");
    m.name.assign(reinterpret_cast<const char*>(b + at + 46), name_len);
    const auto mfail = [&](std::uint64_t where, const std::string& why) { return fail(where, why, m.name); };
    if (flags & 1) throw mfail(at, "encrypted member");
    // zip64 extra field: the 64-bit values of whichever fields are 0xffffffff, in this order.
    const std::byte* extra = b + at + 46 + name_len;
    for (std::uint64_t e = 0; e + 4 <= extra_len;) {
      const std::uint64_t id = le(extra + e, 2), len = le(extra + e + 2, 2);
      if (e + 4 + len > extra_len) throw mfail(at, "extra field runs past its end");
      if (id == 1) {
        std::uint64_t k = 0;
        const auto next = [&](std::uint64_t& field) {
          if (field != 0xffffffff) return;
          if (k + 8 > len) throw mfail(at, "zip64 extra field too short");
          field = le(extra + e + 4 + k, 8);
          k += 8;
        };
        next(m.uncompressed_size);
        next(m.compressed_size);
        next(local);
      }
      e += 4 + len;
    }
    if (local > cd_offset || cd_offset - local < 30 || le(b + local, 4) != sig_local)
      throw mfail(at, "local header offset " + std::to_string(local) + " is outside the data area or holds no local header");
    const std::uint64_t lname = le(b + local + 26, 2), lextra = le(b + local + 28, 2);
    if (30 + lname + lextra > cd_offset - local) throw mfail(local, "local header runs past the data area");
    m.data_offset = local + 30 + lname + lextra;
    if (m.compressed_size > cd_offset - m.data_offset)
      throw mfail(m.data_offset, "member data (" + std::to_string(m.compressed_size) +
                                     " bytes) runs past the central directory (truncated archive?)");
    if (m.method == 0 && m.compressed_size != m.uncompressed_size)
      throw mfail(at, "stored member whose sizes differ");
    if (m.method != 0 && m.method != 8)
      throw mfail(at, "compression method " + std::to_string(m.method) + " (only stored and deflate are read)");
    out.push_back(std::move(m));
    at += 46 + name_len + extra_len + comment_len;
  }
  std::vector<const ZipMember*> sorted;
  for (const ZipMember& m : out) sorted.push_back(&m);
  std::sort(sorted.begin(), sorted.end(), [](auto* x, auto* y) { return x->data_offset < y->data_offset; });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->data_offset < sorted[i - 1]->data_offset + sorted[i - 1]->compressed_size)
      throw fail(sorted[i]->data_offset, "member overlaps '" + sorted[i - 1]->name + "'", sorted[i]->name);
  return out;
}

std::span<const std::byte> zip_member_data(std::span<const std::byte> bytes, const ZipMember& m,
                                           const std::filesystem::path& file, std::vector<std::byte>& storage) {
  const std::span<const std::byte> raw = bytes.subspan(m.data_offset, m.compressed_size);
  std::span<const std::byte> data = raw;
  if (m.method == 8) {
    // Deflate cannot expand more than 1032:1; a larger claim is a lie that
    // would only make us allocate.
    if (m.uncompressed_size > m.compressed_size * 1032 + 1024)
      throw FileError(file, m.name, m.data_offset,
                      "claims " + std::to_string(m.uncompressed_size) + " uncompressed bytes from " +
                          std::to_string(m.compressed_size) + " (more than deflate can expand)");
    storage.assign(m.uncompressed_size, std::byte{0});
    z_stream z{};
    if (::inflateInit2(&z, -MAX_WBITS) != Z_OK) throw FileError(file, m.name, m.data_offset, "zlib inflateInit failed");
    std::uint64_t in_done = 0, out_done = 0;
    int rc = Z_OK;
    constexpr std::uint64_t step = 1u << 30;
    while (rc == Z_OK) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(raw.data() + in_done));
      z.avail_in = static_cast<uInt>(std::min(step, raw.size() - in_done));
      z.next_out = reinterpret_cast<Bytef*>(storage.data() + out_done);
      z.avail_out = static_cast<uInt>(std::min(step, storage.size() - out_done));
      const uInt in_before = z.avail_in, out_before = z.avail_out;
      rc = ::inflate(&z, Z_NO_FLUSH);
      in_done += in_before - z.avail_in;
      out_done += out_before - z.avail_out;
      if (rc == Z_OK && in_before == z.avail_in && out_before == z.avail_out) rc = Z_BUF_ERROR;  // no progress
    }
    ::inflateEnd(&z);
    if (rc != Z_STREAM_END || out_done != storage.size())
      throw FileError(file, m.name, m.data_offset + in_done,
                      "deflate stream is corrupt or does not hold the " + std::to_string(m.uncompressed_size) +
                          " bytes it claims (" + std::to_string(out_done) + " inflated)");
    data = storage;
  }
  if (crc_of(data) != m.crc32) throw FileError(file, m.name, m.data_offset, "CRC-32 mismatch (corrupted member)");
  return data;
}

std::vector<std::byte> zip_image(const std::vector<ZipInput>& members, bool deflate) {
  if (members.size() >= 0xffff) throw std::invalid_argument("zip_image: too many members");
  std::vector<std::byte> out, central;
  for (const ZipInput& m : members) {
    std::vector<std::byte> packed;
    if (deflate) {
      z_stream z{};
      if (::deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("zip_image: deflateInit failed");
      packed.resize(::deflateBound(&z, static_cast<uLong>(m.data.size())));
      z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(m.data.data()));
      z.avail_in = static_cast<uInt>(m.data.size());
      z.next_out = reinterpret_cast<Bytef*>(packed.data());
      z.avail_out = static_cast<uInt>(packed.size());
      const int rc = ::deflate(&z, Z_FINISH);
      packed.resize(z.total_out);
      ::deflateEnd(&z);
      if (rc != Z_STREAM_END) throw std::runtime_error("zip_image: deflate failed");
    } else {
      packed = m.data;
    }
    const std::uint64_t local = out.size();
    if (local + packed.size() > 0xfffffff0u) throw std::invalid_argument("zip_image: archive too large without zip64");
    const std::uint32_t crc = crc_of(m.data);
    const std::uint16_t method = deflate ? 8 : 0;
    put(out, sig_local, 4);
    put(out, 20, 2);  // version needed
    put(out, 0, 2);   // flags
    put(out, method, 2);
    put(out, 0, 4);  // time, date
    put(out, crc, 4);
    put(out, packed.size(), 4);
    put(out, m.data.size(), 4);
    put(out, m.name.size(), 2);
    put(out, 0, 2);
    for (const char c : m.name) out.push_back(static_cast<std::byte>(c));
    out.insert(out.end(), packed.begin(), packed.end());
    put(central, sig_central, 4);
    put(central, 20, 2);
    put(central, 20, 2);
    put(central, 0, 2);
    put(central, method, 2);
    put(central, 0, 4);
    put(central, crc, 4);
    put(central, packed.size(), 4);
    put(central, m.data.size(), 4);
    put(central, m.name.size(), 2);
    put(central, 0, 2);  // extra
    put(central, 0, 2);  // comment
    put(central, 0, 2);  // disk
    put(central, 0, 2);  // internal attributes
    put(central, 0, 4);  // external attributes
    put(central, local, 4);
    for (const char c : m.name) central.push_back(static_cast<std::byte>(c));
  }
  const std::uint64_t cd_offset = out.size();
  out.insert(out.end(), central.begin(), central.end());
  put(out, sig_eocd, 4);
  put(out, 0, 4);  // disk numbers
  put(out, members.size(), 2);
  put(out, members.size(), 2);
  put(out, central.size(), 4);
  put(out, cd_offset, 4);
  put(out, 0, 2);  // comment length
  return out;
}

}  // namespace mpverify::io
