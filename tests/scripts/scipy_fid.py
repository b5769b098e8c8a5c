#!/usr/bin/env python3
"""FID of two feature matrices by pytorch-fid's recipe, the reference that
tests/fid_test.cpp holds mpverify's FID against.

Usage: scipy_fid.py A.txt B.txt   (whitespace-separated rows, one sample a line)
Prints the FID with 17 significant digits.

The statistics are pytorch-fid's (`calculate_activation_statistics`: np.mean
over rows, np.cov(rowvar=False), the N - 1 denominator); the distance is
pytorch-fid's `calculate_frechet_distance` (src/pytorch_fid/fid_score.py),
transcribed line by line: scipy.linalg.sqrtm of the product sigma1 . sigma2,
an eps offset when the result is not finite, the imaginary part dropped when
its diagonal is within 1e-3 of zero.
"""
import sys

import numpy as np
from scipy import linalg


def calculate_frechet_distance(mu1, sigma1, mu2, sigma2, eps=1e-6):
    mu1 = np.atleast_1d(mu1)
    mu2 = np.atleast_1d(mu2)
    sigma1 = np.atleast_2d(sigma1)
    sigma2 = np.atleast_2d(sigma2)
    assert mu1.shape == mu2.shape, "Training and test mean vectors have different lengths"
    assert sigma1.shape == sigma2.shape, "Training and test covariances have different dimensions"
    diff = mu1 - mu2
    # Product might be almost singular
    covmean, _ = linalg.sqrtm(sigma1.dot(sigma2), disp=False)
    if not np.isfinite(covmean).all():
        print("fid calculation produces singular product; adding %s to diagonal of cov estimates" % eps,
              file=sys.stderr)
        offset = np.eye(sigma1.shape[0]) * eps
        covmean = linalg.sqrtm((sigma1 + offset).dot(sigma2 + offset))
    # Numerical error might give slight imaginary component
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0, atol=1e-3):
            m = np.max(np.abs(covmean.imag))
            raise ValueError("Imaginary component {}".format(m))
        covmean = covmean.real
    tr_covmean = np.trace(covmean)
    return diff.dot(diff) + np.trace(sigma1) + np.trace(sigma2) - 2 * tr_covmean


def statistics(path):
    act = np.loadtxt(path, dtype=np.float64, ndmin=2)
    return np.mean(act, axis=0), np.cov(act, rowvar=False)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    mu1, sigma1 = statistics(sys.argv[1])
    mu2, sigma2 = statistics(sys.argv[2])
    print("%.17g" % calculate_frechet_distance(mu1, sigma1, mu2, sigma2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
