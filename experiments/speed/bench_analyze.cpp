// `mpverify analyze` speed on a large float32 .npy against a plain read of
// the same file in the same run (the goal: at least half of it).
//
//   bench_analyze [--bytes N] [--file PATH] [--repeats R] [--seed S] [--threads T1,T2,...] [--scales S1,S2,...]
//
// Writes a float32 .npy of N bytes (default 1 GiB; gradient-like values:
// seeded normal significands over 2^-40 .. 2^4, 5% exact zeros) to PATH
// (default /tmp), then alternates R times (default 3), for each thread count
// T (default 1,2): two plain reads, and analyze_path with T counting threads
// at 8 power-of-two scales 1, 8, ..., 2^21 into fp16 (or the --scales given:
// scales that are not powers of two time the counter's coarse layout, see
// analysis/threshold_counter.h). The plain reads:
// read(2) of the whole file in 1 MiB pieces into one buffer (one thread, as
// `cat` or numpy.fromfile read a file: the kernel copies every byte out of
// the page cache), and, harder to match, T threads each summing the 8-byte
// words of its share of the mapped file (no copy, vectorized). Reports the
// best of each as bytes/s, analyze's ratio to both, and the anonymous
// memory (RssAnon) the analysis added, to show that the file is mapped, not
// copied. Deletes the file at the end. Both reads see the page cache warm
// after the first pass.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "analysis/dump_analysis.h"
#include "analysis/scale_sweep.h"
#include "analysis/threshold_counter.h"
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

// Sums the 8-byte words of the mapped file with `threads` threads.
std::uint64_t plain_read(const std::filesystem::path& file, std::size_t threads) {
  const mpverify::io::MappedFile m(file);
  const auto b = m.bytes();
  const std::size_t words = b.size() / 8, per = (words + threads - 1) / threads;
  std::vector<std::uint64_t> sums(threads);
  {
    std::vector<std::jthread> workers;
    for (std::size_t t = 0; t < threads; ++t)
      workers.emplace_back([&sums, t, p = b.data() + 8 * std::min(words, t * per),
                            count = std::min(words, (t + 1) * per) - std::min(words, t * per)] {
        std::uint64_t sum = 0;  // a loop the compiler vectorizes
        for (std::size_t i = 0; i < count; ++i) {
          std::uint64_t w;
          std::memcpy(&w, p + 8 * i, 8);
          sum += w;
        }
        sums[t] = sum;
      });
  }
  std::uint64_t sum = 0;
  for (const std::uint64_t s : sums) sum += s;
  return sum;
}

// read(2) of the whole file in 1 MiB pieces into one buffer; returns a
// checksum of the last byte of each piece so that the reads are used.
std::uint64_t syscall_read(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("bench_analyze: cannot open " + file.string());
  std::vector<unsigned char> buffer(std::size_t{1} << 20);
  std::uint64_t check = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      ::close(fd);
      throw std::runtime_error("bench_analyze: read failed on " + file.string());
    }
    if (got == 0) break;
    check += buffer[static_cast<std::size_t>(got) - 1];
  }
  ::close(fd);
  return check;
}

// "1,2,4" -> {1, 2, 4}, each item read by `parse(text, &used)` (std::stoul, std::stod).
template <class T, class Parse>
std::vector<T> comma_list(const char* text, Parse parse) {
  std::vector<T> out;
  for (std::size_t p = 0; p < std::strlen(text);) {
    std::size_t used = 0;
    out.push_back(static_cast<T>(parse(text + p, &used)));
    p += used + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mpverify;
  std::uint64_t bytes = 1ull << 30;
  std::string file = (std::filesystem::temp_directory_path() / "mpverify_bench_analyze.npy").string();
  int repeats = 3;
  std::uint64_t seed = 1;
  std::vector<std::size_t> thread_counts = {1, 2};
  std::vector<double> scales = {1.0, 8.0, 64.0, 512.0, 4096.0, 32768.0, 262144.0, 2097152.0};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--bytes") bytes = std::stoull(argv[i + 1]);
    else if (a == "--file") file = argv[i + 1];
    else if (a == "--repeats") repeats = std::stoi(argv[i + 1]);
    else if (a == "--seed") seed = std::stoull(argv[i + 1]);
    else if (a == "--scales")
      scales = comma_list<double>(argv[i + 1], [](const char* t, std::size_t* used) { return std::stod(t, used); });
    else if (a == "--threads")
      thread_counts =
          comma_list<std::size_t>(argv[i + 1], [](const char* t, std::size_t* used) { return std::stoul(t, used); });
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
  const analysis::SweepPlan plan(formats::parse_format("fp16"), scales);
  const std::size_t runs = thread_counts.size();
  std::vector<double> best_read(runs, 1e300), best_analyze(runs, 1e300);
  double best_syscall_read = 1e300;
  std::uint64_t checksum = 0, underflow = 0;
  long anon_added_kib = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t_read = std::chrono::steady_clock::now();
    checksum += syscall_read(file);
    best_syscall_read = std::min(best_syscall_read, seconds_since(t_read));
    for (std::size_t c = 0; c < runs; ++c) {
      auto t0 = std::chrono::steady_clock::now();
      checksum += plain_read(file, thread_counts[c]);
      best_read[c] = std::min(best_read[c], seconds_since(t0));
      analysis::set_default_counter_threads(thread_counts[c]);
      const long anon_before = rss_anon_kib();
      t0 = std::chrono::steady_clock::now();
      const analysis::DumpAnalysis a = analysis::analyze_path(file, plan);
      best_analyze[c] = std::min(best_analyze[c], seconds_since(t0));
      anon_added_kib = std::max(anon_added_kib, rss_anon_kib() - anon_before);
      if (r == 0 && c == 0) underflow = a.total[0].underflow_to_zero;
      if (a.total[0].underflow_to_zero != underflow) {
        std::fprintf(stderr, "analyze with %zu threads counted differently\n", thread_counts[c]);
        return 1;
      }
    }
  }
  std::filesystem::remove(file);
  std::printf("file: %.0f bytes (%zu float32 values), %d repeats, best of each (checksum %llu)\n", file_bytes, n,
              repeats, static_cast<unsigned long long>(checksum));
  const double syscall_bps = file_bytes / best_syscall_read;
  std::printf("plain read with read(2), 1 MiB pieces, one thread: %.3f s, %.2f GB/s\n", best_syscall_read,
              syscall_bps / 1e9);
  for (std::size_t c = 0; c < runs; ++c) {
    const double read_bps = file_bytes / best_read[c], analyze_bps = file_bytes / best_analyze[c];
    std::printf("%zu thread(s): analyze, fp16, %zu scales %.3f s, %.2f GB/s: ratio %.2f to read(2) (goal >= 0.5); "
                "sum of the mapped words %.3f s, %.2f GB/s: ratio %.2f to it\n",
                thread_counts[c], scales.size(), best_analyze[c], analyze_bps / 1e9, analyze_bps / syscall_bps, best_read[c],
                read_bps / 1e9, analyze_bps / read_bps);
  }
  if (runs > 1)
    std::printf("analyze with %zu threads / plain read with %zu: %.2f\n", thread_counts.back(), thread_counts.front(),
                best_read.front() / best_analyze.back());
  std::printf("underflow to zero at scale 1: %llu\n", static_cast<unsigned long long>(underflow));
  std::printf("anonymous memory added by analyze: %ld KiB\n", anon_added_kib);
  return 0;
}
