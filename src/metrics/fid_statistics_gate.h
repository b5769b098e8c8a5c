// The parity gate on FID statistics files (`mpverify gate --metric fid
// --fid-reference REAL.npz --baseline DIR --candidate DIR`): each side is a
// directory of per-run statistics, DIR/seed-<s>.npz (mu and sigma of that
// run's generated images' features, as pytorch-fid --save-stats or clean-fid
// write them; metrics/fid_statistics.h), and each run's FID is computed here
// against one reference statistics file (the real images'), the way
// pytorch-fid and clean-fid compare a generator with precomputed dataset
// statistics. The FIDs then go through the gate exactly as a value file's
// values would (seeds from the file names: the same seeds on both sides pair
// the runs), named by their statistics file.
//
// Bad input (InputError, exit 2): a side that is not a directory, holds no
// seed-<s>.npz, holds another .npz (a misnamed run must not drop out
// silently), two names for one seed (seed-01 and seed-1), a statistics file
// that fails read_fid_statistics, or a d other than the reference's.
#pragma once

#include <filesystem>
#include <string>

#include "metrics/fid.h"
#include "metrics/parity_gate.h"
#include "metrics/value_file.h"

namespace mpverify::metrics {

// The per-run FIDs of DIR/seed-<s>.npz against `reference` as a value file
// named `dir` (records in seed order, each record's source its file).
ValueFile fid_statistics_values(const std::filesystem::path& dir, const GaussianStats& reference,
                                const std::string& reference_name, TraceRoute route = TraceRoute::nuclear_norm);

// The gate's decision on two such directories (options.metric must be fid).
// The result's notes say what the reference was and that N is not recorded.
GateResult evaluate_fid_statistics_gate(const std::filesystem::path& baseline, const std::filesystem::path& candidate,
                                        const std::filesystem::path& reference, const GateOptions& options);

}  // namespace mpverify::metrics
