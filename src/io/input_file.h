// The one way mpverify opens a file it reads. Every input is untrusted (docs/security.md): a name may be a
// FIFO, on which an open or a read waits for a writer forever, or a link to a device such as /dev/zero, which
// never ends. Only regular files (links followed) are read; anything else is refused by name before it is
// opened, so no reader blocks or runs out of memory on one.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace mpverify::io {

// What `file` is when it exists and is not a regular file once links are followed ("a FIFO (named pipe)",
// "a character device", "a directory", ...); "" for a regular file or a name that does not exist (the open
// then reports it). Never blocks: it asks stat(2), not open(2).
std::string not_a_regular_file(const std::filesystem::path& file);

// Throws std::runtime_error "FILE: is a FIFO (named pipe), not a regular file; ..." when not_a_regular_file
// names something.
void require_regular_file(const std::filesystem::path& file);

// An input stream on `file` after require_regular_file; the caller checks it opened, as with std::ifstream.
std::ifstream open_input_file(const std::filesystem::path& file, std::ios::openmode mode = std::ios::binary);

}  // namespace mpverify::io
