#include "data/synthetic_digits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/random.h"

namespace mpverify::data {
namespace {

struct Point {
  double x, y;
};

struct Polyline {
  std::vector<Point> points;
  bool closed = false;
};

using Shape = std::vector<Polyline>;

// cos(15 k degrees), k = 0..6, as correctly rounded literals: the ring's
// vertices without calling cos/sin.
constexpr std::array<double, 7> kCos15 = {1.0,
                                          0.9659258262890683,
                                          0.8660254037844386,
                                          0.7071067811865476,
                                          0.5,
                                          0.25881904510252074,
                                          0.0};

Polyline ring() {
  Polyline p{{}, true};
  for (int k = 0; k < 24; ++k) {
    // cos(15k) and sin(15k) = cos(15(k - 6)) from the quarter table by symmetry.
    auto cos15 = [](int j) {
      j = ((j % 24) + 24) % 24;
      if (j <= 6) return kCos15[static_cast<std::size_t>(j)];
      if (j <= 12) return -kCos15[static_cast<std::size_t>(12 - j)];
      if (j <= 18) return -kCos15[static_cast<std::size_t>(j - 12)];
      return kCos15[static_cast<std::size_t>(24 - j)];
    };
    p.points.push_back({cos15(k), cos15(k - 6)});
  }
  return p;
}

// The patterns in a unit frame ([-1, 1]^2, y pointing down).
Shape pattern(int label) {
  switch (label) {
    case 0: return {ring()};
    case 1: return {{{{0, -1}, {0, 1}}}};
    case 2: return {{{{-1, 0}, {1, 0}}}};
    case 3: return {{{{-0.8, 0.8}, {0.8, -0.8}}}};
    case 4: return {{{{0, -1}, {0, 1}}}, {{{-1, 0}, {1, 0}}}};
    case 5: return {{{{-0.8, -0.8}, {0.8, 0.8}}}, {{{-0.8, 0.8}, {0.8, -0.8}}}};
    case 6: return {{{{-0.6, -1}, {-0.6, 1}, {0.7, 1}}}};
    case 7: return {{{{-0.9, -1}, {0.9, -1}}}, {{{0, -1}, {0, 1}}}};
    case 8: return {{{{0, -1}, {0.95, 0.8}, {-0.95, 0.8}}, true}};
    case 9: return {{{{-0.8, -0.8}, {0.8, -0.8}, {0.8, 0.8}, {-0.8, 0.8}}, true}};
    default: throw std::logic_error("synthetic_digits: no pattern " + std::to_string(label));
  }
}

struct Segment {
  Point a, b;
};

// Squared distance from p to the segment; IEEE basic operations only.
double distance2(Point p, const Segment& s) {
  const double dx = s.b.x - s.a.x, dy = s.b.y - s.a.y;
  const double len2 = dx * dx + dy * dy;
  double t = len2 > 0 ? ((p.x - s.a.x) * dx + (p.y - s.a.y) * dy) / len2 : 0.0;
  t = std::clamp(t, 0.0, 1.0);
  const double ex = p.x - (s.a.x + t * dx), ey = p.y - (s.a.y + t * dy);
  return ex * ex + ey * ey;
}

// The ranges of the per-image variation, in units of the image size where a
// length (so the look does not depend on image_size).
constexpr double kMinHalfExtent = 0.225, kMaxHalfExtent = 0.35;  // of the size
constexpr double kMaxAspect = 1.15;                               // x/y stretch in [1/1.15, 1.15]
constexpr double kMaxTanHalfAngle = 0.15;                         // |angle| <= 2 atan(0.15) ~ 17 degrees
constexpr double kMaxShift = 0.08;                                // of the size, each axis
constexpr double kMinStroke = 1.0 / 28, kMaxStroke = 2.6 / 28;    // stroke width, of the size
constexpr double kMinBrightness = 0.6, kMaxBrightness = 1.0;
constexpr double kVertexJitter = 0.08;  // unit-frame units, each coordinate
constexpr double kNoiseSigma = 0.06;

void draw_example(Draws& rng, int classes, int size, float* pixels, std::int32_t& label) {
  label = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(classes)));
  const double n = size;
  const double half_extent = rng.uniform(kMinHalfExtent, kMaxHalfExtent) * n;
  const double aspect = rng.uniform(1.0 / kMaxAspect, kMaxAspect);
  const double t = rng.uniform(-kMaxTanHalfAngle, kMaxTanHalfAngle);
  const double cos_a = (1 - t * t) / (1 + t * t), sin_a = 2 * t / (1 + t * t);
  const double cx = (n - 1) / 2 + rng.uniform(-kMaxShift, kMaxShift) * n;
  const double cy = (n - 1) / 2 + rng.uniform(-kMaxShift, kMaxShift) * n;
  const double stroke = rng.uniform(kMinStroke, kMaxStroke) * n;
  const double brightness = rng.uniform(kMinBrightness, kMaxBrightness);

  std::vector<Segment> segments;
  for (const Polyline& line : pattern(label)) {
    std::vector<Point> placed;
    for (const Point& q : line.points) {
      const double u = (q.x + rng.uniform(-kVertexJitter, kVertexJitter)) * half_extent * aspect;
      const double v = (q.y + rng.uniform(-kVertexJitter, kVertexJitter)) * half_extent / aspect;
      placed.push_back({cx + cos_a * u - sin_a * v, cy + sin_a * u + cos_a * v});
    }
    for (std::size_t k = 0; k + 1 < placed.size(); ++k) segments.push_back({placed[k], placed[k + 1]});
    if (line.closed) segments.push_back({placed.back(), placed.front()});
  }

  // A pixel is covered by the part of a one-pixel-wide box filter that
  // overlaps the stroke, approximated by its distance to the stroke's spine.
  for (int row = 0; row < size; ++row) {
    for (int col = 0; col < size; ++col) {
      const Point p{static_cast<double>(col), static_cast<double>(row)};
      double d2 = distance2(p, segments.front());
      for (std::size_t k = 1; k < segments.size(); ++k) d2 = std::min(d2, distance2(p, segments[k]));
      const double coverage = std::clamp(stroke / 2 + 0.5 - std::sqrt(d2), 0.0, 1.0);
      const double value = std::clamp(brightness * coverage + kNoiseSigma * rng.noise(), 0.0, 1.0);
      pixels[row * size + col] = static_cast<float>(value);
    }
  }
}

constexpr std::uint64_t kStreamsPerSet = std::uint64_t{1} << 48;

Dataset draw_set(const SyntheticOptions& o, std::uint64_t set, std::size_t count) {
  Dataset d;
  d.height = d.width = o.image_size;
  d.channels = 1;
  d.classes = o.classes;
  d.images.resize(count * d.image_size());
  d.labels.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    Draws rng(o.seed, set * kStreamsPerSet + i);
    draw_example(rng, o.classes, o.image_size, d.images.data() + i * d.image_size(), d.labels[i]);
  }
  return d;
}

}  // namespace

Split synthetic_digits(const SyntheticOptions& o) {
  if (o.classes < 1 || o.classes > kSyntheticPatterns) {
    throw std::invalid_argument("synthetic_digits: classes must be in [1, 10], got " + std::to_string(o.classes));
  }
  if (o.image_size < 8 || o.image_size > 1024) {
    throw std::invalid_argument("synthetic_digits: image_size must be in [8, 1024], got " +
                                std::to_string(o.image_size));
  }
  if (o.train_size >= kStreamsPerSet || o.test_size >= kStreamsPerSet) {
    throw std::invalid_argument("synthetic_digits: train_size and test_size must be below 2^48");
  }
  return Split{draw_set(o, 1, o.train_size), draw_set(o, 2, o.test_size)};
}

}  // namespace mpverify::data
