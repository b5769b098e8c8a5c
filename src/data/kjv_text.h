// The King James Version of the Bible (1611; public domain) as Debian 12's
// package bible-kjv-text ships it: /usr/lib/bible.data, the text file of the
// Bible Retrieval System (the `bible` program of package bible-kjv). Nothing
// is fetched at run time: the setup step installs the package,
//   apt-get install -y bible-kjv-text
// (.ci/install-deps does it).
//
// The file's format (the program's tsl.h; integers big-endian):
//   bytes 0..1   "EC" (magic), 2..3 "02" (version), 4..83 a description;
//   84..87       window size W (65,536), 88..91 the number of windows N (68);
//   92..         N + 1 file offsets: where window k's compressed bytes begin,
//                the last one the file's size;
//   then         compress(1)'s 3-byte header (1F 9D 90: 16-bit codes, block
//                mode), and the windows: window k is an LZW stream of its
//                own (data/lzw.h) that decodes to bytes [kW, (k+1)W) of the
//                text (the last window to what remains).
// The text is 31,103 lines: a title line, then one line per verse, the
// verse's reference first ("Ge1:1 In the beginning God created ...").
//
// The file is, in this order: the one the caller passes (a file, or a
// directory holding bible.data), $MPVERIFY_KJV_FILE, or Debian's path.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace mpverify::data {

inline constexpr std::size_t kKjvRawBytes = 4404475;  // the decoded file, title line included
inline constexpr std::size_t kKjvVerses = 31102;

// $MPVERIFY_KJV_FILE if set, else /usr/lib/bible.data.
std::filesystem::path kjv_default_file();
// "apt-get install -y bible-kjv-text".
std::string kjv_install_command();

// The decoded text of the file, exactly (title line and references included).
// An empty `path` means kjv_default_file(); a directory means its bible.data.
// Throws DataFileError (data/data_file_error.h) naming the file and what is
// wrong: a missing file also names the install command.
std::string read_kjv_data(const std::filesystem::path& path = {});

// The verses alone: the title line is dropped and each verse line loses its
// reference and the space after it ("Ge1:1 In the beginning ..." becomes
// "In the beginning ..."); every verse keeps its '\n'. A reference is a
// book abbreviation (an optional digit 1..3, a capital letter, letters) and
// CHAPTER:VERSE. Throws DataFileError naming `source` and the line for a
// line without a reference or a text that does not end in '\n'.
std::string kjv_verses(std::string_view raw, std::string_view source);

// kjv_verses(read_kjv_data(path)): 31,102 verses, 4,137,850 bytes.
std::string load_kjv_verses(const std::filesystem::path& path = {});

}  // namespace mpverify::data
