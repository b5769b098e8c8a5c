// FID statistics files (metrics/fid_statistics.h: an .npz of mu [d] and sigma [d, d], as pytorch-fid and
// clean-fid write them), then the FID of the statistics against themselves on both trace routes. Input: the
// .npz's bytes. Beyond the documented refusal (std::invalid_argument naming the file), a finding is also a FID
// that is not finite and >= 0 for statistics the reader accepted: the reader refuses what is not a covariance.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "fuzz_support.h"
#include "metrics/fid.h"
#include "metrics/fid_statistics.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  const auto& dir = fuzz::scratch().fresh();
  fuzz::write_file(dir / "stats.npz", fuzz::text_of(data, size));
  metrics::GaussianStats g;
  try {
    g = metrics::read_fid_statistics(dir / "stats.npz");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  for (const auto route : {metrics::TraceRoute::nuclear_norm, metrics::TraceRoute::symmetric_eigen}) {
    const metrics::FidResult r = metrics::frechet_distance(g, g, route);
    if (!std::isfinite(r.fid) || r.fid < 0) {
      std::cerr << "fuzz_fid_statistics: FID " << r.fid << " (raw " << r.fid_raw << ") of accepted statistics, d = "
                << g.dims() << "\n";
      std::abort();
    }
  }
  return 0;
}
