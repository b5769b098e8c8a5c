// FID statistics files: the mean and covariance of a set's features saved as
// an .npz, as pytorch-fid and clean-fid write them, read in place of the
// features themselves.
//
//   pytorch-fid (src/pytorch_fid/fid_score.py, save_fid_stats, `--save-stats`):
//       np.savez_compressed(paths[1], mu=m1, sigma=s1)
//   and compute_statistics_of_path reads one back as f['mu'][:], f['sigma'][:].
//   clean-fid (cleanfid/fid.py, make_custom_stats):
//       np.savez_compressed(outf, mu=mu, sigma=sigma)
//   with mu = np.mean(feats, axis=0) (float32 for float32 features) and
//   sigma = np.cov(feats, rowvar=False) (always float64: np.cov promotes).
// np.savez (stored members) is read as well.
//
// A statistics file must hold `mu` of shape [d] and `sigma` of shape [d, d]
// (d >= 1), each float32 or float64, every value finite, sigma's diagonal
// >= 0 (variances), and sigma symmetric within kSymmetryTolerance of its
// largest variance (see below). Other members are ignored. Everything wrong
// is a std::invalid_argument whose message names the file, the key and what
// is wrong with it.
//
// A statistics file does not record how many samples it came from: FID is
// biased by N (fid.h), so compare only statistics made at the same N (and
// through the same extractor, the same preprocessing).
#pragma once

#include <filesystem>
#include <string>

#include "metrics/fid_features.h"

namespace mpverify::metrics {

// |sigma[i, j] - sigma[j, i]| <= kSymmetryTolerance * max_k sigma[k, k].
// Why 1e-4: np.cov (pytorch-fid, clean-fid) computes in float64 and numpy
// forms X X^T with one symmetric product (syrk), so its sigma is symmetric to
// the bit, and rounding a symmetric matrix to float32 keeps it symmetric. A
// covariance computed in float32 with the two triangles summed in different
// orders differs by about sqrt(N) u32 ~ 6e-8 sqrt(N) of the variances: 6e-5
// at N = 10^6 samples, inside 1e-4. A matrix that is not a covariance at all
// (a Cholesky factor, the features' Gram matrix mislabelled, a transposed
// block) is asymmetric by O(1) of its scale. |sigma[i, j]| <= max_k sigma[k,k]
// for any covariance, which is why the largest variance is the scale.
inline constexpr double kSymmetryTolerance = 1e-4;

// Whether a path names a statistics file (ends in .npz, case-sensitive as
// numpy writes it).
bool is_fid_statistics_file(const std::filesystem::path& path);

// Reads and checks `file` (see above); count is 0 (unknown).
GaussianStats read_fid_statistics(const std::filesystem::path& file);

}  // namespace mpverify::metrics
