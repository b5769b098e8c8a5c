// A memory-mapped input that another process truncates while mpverify reads it: the first read of a page past
// the file's new end raises SIGBUS, which would end the program with a crash and no word of why. The mapped
// files register their ranges here; once the program calls exit_on_shrunk_mapping() (src/cli/main.cpp does,
// first thing), such a SIGBUS ends it with exit code 2 and a line naming the file. Results read from a file
// that changed under the reader are void, so stopping is the only honest outcome. A library (the Python
// module) leaves the process's signals to its host, so there the signal stays.
#pragma once

#include <cstddef>
#include <filesystem>

namespace mpverify::io {

// Installs the SIGBUS handler for the whole process. Idempotent.
void exit_on_shrunk_mapping();

// The range [begin, begin + size) maps `file` (MappedFile calls these). At most 256 ranges are named at
// once; a fault in a range beyond those still exits 2, with a message that names no file.
void register_mapping(const void* begin, std::size_t size, const std::filesystem::path& file);
void unregister_mapping(const void* begin);

}  // namespace mpverify::io
