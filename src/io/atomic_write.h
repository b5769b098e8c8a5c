// Writes a binary file so that readers see either no file or the whole file:
// path.tmp, fsync, rename. (record::write_file_atomically does the same for
// text, but io is below record in the layers and may not include it.)
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace mpverify::io {

// Throws io::FileError (offset: bytes written so far) when writing fails; the
// temporary file is removed then.
void write_bytes_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace mpverify::io
