#include "io/npz_write.h"

#include <set>
#include <stdexcept>

#include "io/atomic_write.h"
#include "io/zip_archive.h"

namespace mpverify::io {

void write_npz_members(const std::filesystem::path& file, const std::vector<NpzMember>& members) {
  std::set<std::string> names;
  std::vector<ZipInput> inputs;
  for (const NpzMember& m : members) {
    if (!names.insert(m.name).second) throw std::invalid_argument("write_npz_members: two arrays named '" + m.name + "'");
    inputs.push_back({m.name + ".npy", m.npy});
  }
  write_bytes_atomically(file, zip_image(inputs, false));
}

}  // namespace mpverify::io
