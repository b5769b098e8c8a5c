// The members of a zip archive, as numpy's np.savez (stored) and
// np.savez_compressed (deflate) write them, zip64 included (numpy forces
// zip64 local headers). Every field is checked against the file size: the
// end-of-central-directory record, the central directory's extent, each
// entry's name, extra fields and local header, the member's data extent, and
// that no two members overlap. Stored members are views into the file;
// deflated ones are inflated (into memory: a compressed member needs its
// uncompressed size in RAM) and checked against their CRC-32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace mpverify::io {

struct ZipMember {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflate
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint64_t data_offset = 0;  // of the (compressed) data in the archive
};

// The members of the archive in `bytes`, in central-directory order.
// Throws io::FileError naming `file`, the member and the offset.
std::vector<ZipMember> zip_members(std::span<const std::byte> bytes, const std::filesystem::path& file);

// A member's uncompressed bytes: a view into `bytes` when stored, else inflated
// into `storage` (replaced) and checked against the CRC; io::FileError otherwise.
std::span<const std::byte> zip_member_data(std::span<const std::byte> bytes, const ZipMember& m,
                                           const std::filesystem::path& file, std::vector<std::byte>& storage);

struct ZipInput {
  std::string name;
  std::vector<std::byte> data;
};

// A zip archive of the given members (stored, or deflated when `deflate`),
// without zip64: every member and the whole archive under 4 GiB, fewer than
// 65535 members (std::invalid_argument otherwise).
std::vector<std::byte> zip_image(const std::vector<ZipInput>& members, bool deflate);

}  // namespace mpverify::io
