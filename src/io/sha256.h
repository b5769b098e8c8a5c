// SHA-256 (FIPS 180-4) of a byte string or a file, as lowercase hex: what
// `sha256sum FILE` prints, so a run's record of a file (e.g. the FID feature
// extractor in summary.json) can be checked by hand.
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace mpverify::io {

std::string sha256_hex(std::span<const unsigned char> bytes);
// Throws io::FileError (io/file_error.h) when the file cannot be read.
std::string sha256_file_hex(const std::filesystem::path& file);

}  // namespace mpverify::io
