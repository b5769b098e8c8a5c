// `mpverify analyze` speed on a large float32 .npy against a plain read of
// the same file in the same run (the goal: at least half of it).
//
//   bench_analyze [--bytes N] [--file PATH] [--repeats R] [--seed S]
//
// Writes a float32 .npy of N bytes (default 1 GiB; gradient-like values:
// seeded normal significands over 2^-40 .. 2^4, 5% exact zeros) to PATH
// (default /tmp), then alternates R times (default 3): a plain read (summing
// every 8-byte word of the mapped file) and analyze_path at 8 power-of-two
// scales 1, 8, ..., 2^21 into fp16; reports the best of each as bytes/s,
// their ratio, and the anonymous memory (RssAnon) the analysis added, to show
// that the file is mapped, not copied. Deletes the file at the end. Both
// reads see the page cache warm after the first pass.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "analysis/dump_analysis.h"
#include "analysis/scale_sweep.h"
#include "formats/format.h"
#include "io/mapped_file.h"
#include "io/npy.h"

namespace {

long rss_anon_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mpverify;
  std::uint64_t bytes = 1ull << 30;
  std::string file = (std::filesystem::temp_directory_path() / "mpverify_bench_analyze.npy").string();
  int repeats = 3;
  std::uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--bytes") bytes = std::stoull(argv[i + 1]);
    else if (a == "--file") file = argv[i + 1];
    else if (a == "--repeats") repeats = std::stoi(argv[i + 1]);
    else if (a == "--seed") seed = std::stoull(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  const std::size_t n = bytes / 4;
  {
    // Written in pieces through our own header so that the file need not fit in memory twice.
    const std::vector<std::byte> header = io::npy_header_f32({n});
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> chunk(1 << 20);
    for (std::size_t done = 0; done < n; done += chunk.size()) {
      const std::size_t m = std::min(chunk.size(), n - done);
      for (std::size_t i = 0; i < m; ++i)
        chunk[i] = rng() % 20 == 0 ? 0.0f : std::ldexp(normal(rng), static_cast<int>(rng() % 45) - 40);
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(m * 4));
    }
  }
  const double file_bytes = static_cast<double>(std::filesystem::file_size(file));
  const analysis::SweepPlan plan(formats::parse_format("fp16"),
                                 {1.0, 8.0, 64.0, 512.0, 4096.0, 32768.0, 262144.0, 2097152.0});
  double best_read = 1e300, best_analyze = 1e300;
  std::uint64_t checksum = 0, underflow = 0;
  long anon_added_kib = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    {
      const io::MappedFile m(file);
      const auto b = m.bytes();
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i + 8 <= b.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, b.data() + i, 8);
        sum += w;
      }
      checksum += sum;
    }
    best_read = std::min(best_read, seconds_since(t0));
    const long anon_before = rss_anon_kib();
    t0 = std::chrono::steady_clock::now();
    const analysis::DumpAnalysis a = analysis::analyze_path(file, plan);
    best_analyze = std::min(best_analyze, seconds_since(t0));
    anon_added_kib = std::max(anon_added_kib, rss_anon_kib() - anon_before);
    underflow = a.total[0].underflow_to_zero;
  }
  std::filesystem::remove(file);
  const double read_bps = file_bytes / best_read, analyze_bps = file_bytes / best_analyze;
  std::printf("file: %.0f bytes (%zu float32 values), %d repeats, best of each\n", file_bytes, n, repeats);
  std::printf("plain read (sum of mapped words): %.3f s, %.2f GB/s   (checksum %llu)\n", best_read, read_bps / 1e9,
              static_cast<unsigned long long>(checksum));
  std::printf("analyze, fp16, 8 scales:          %.3f s, %.2f GB/s   (underflow to zero at 1: %llu)\n", best_analyze,
              analyze_bps / 1e9, static_cast<unsigned long long>(underflow));
  std::printf("ratio analyze / plain read: %.2f (goal >= 0.5)\n", analyze_bps / read_bps);
  std::printf("anonymous memory added by analyze: %ld KiB\n", anon_added_kib);
  return 0;
}
