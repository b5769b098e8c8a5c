#include "io/npz.h"

#include "io/atomic_write.h"
#include "io/npy.h"
#include "io/zip_archive.h"

namespace mpverify::io {

TensorFile read_npz(const std::filesystem::path& file) {
  TensorFile f;
  f.path = file;
  f.mapping = std::make_unique<MappedFile>(file);
  const std::span<const std::byte> bytes = f.mapping->bytes();
  for (const ZipMember& m : zip_members(bytes, file)) {
    const std::string_view suffix = ".npy";
    if (m.name.size() <= suffix.size() || m.name.compare(m.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      f.skipped.push_back(m.name + " (not an .npy member)");
      continue;
    }
    const std::string name = m.name.substr(0, m.name.size() - suffix.size());
    std::vector<std::byte> storage;
    const std::span<const std::byte> data = zip_member_data(bytes, m, file, storage);
    // A problem inside a deflated member is reported at the member's start in
    // the archive, with the offset inside the inflated bytes in the reason.
    TensorEntry e;
    try {
      e = parse_npy(data, file, name, m.method == 0 ? m.data_offset : 0);
    } catch (const NonFloatArray& err) {  // integers or booleans: well-formed, nothing to analyse
      f.skipped.push_back(name + " (" + err.descr() + ")");
      continue;
    } catch (const FileError& err) {
      if (m.method == 0) throw;
      throw FileError(file, name, m.data_offset,
                      "at byte " + std::to_string(err.offset()) + " of the inflated member: " + err.reason());
    }
    if (m.method != 0) {
      e.data_offset = m.data_offset;
      f.buffers.push_back(std::move(storage));  // e.data points into it; moving the vector keeps its buffer
    }
    f.tensors.push_back(std::move(e));
  }
  return f;
}

void write_npz(const std::filesystem::path& file, const std::vector<NpzArray>& arrays, bool compressed) {
  std::vector<ZipInput> members;
  for (const NpzArray& a : arrays) members.push_back({a.name + ".npy", npy_image(a.values, a.shape)});
  write_bytes_atomically(file, zip_image(members, compressed));
}

}  // namespace mpverify::io
