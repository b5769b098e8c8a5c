#include "training/feature_extractor.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "io/input_file.h"
#include "io/safetensors.h"
#include "nn/batch_norm_layer.h"
#include "nn/models.h"
#include "nn/ref_backend.h"
#include "training/trainer.h"

namespace mpverify::training {

namespace {

constexpr std::size_t kChunk = 256;
constexpr std::size_t kFeatureLayers = 8;  // conv1 ... pool2: everything before fc
constexpr std::size_t kClasses = 10;
constexpr std::size_t kPixels = static_cast<std::size_t>(kFeatureSide) * kFeatureSide;

// The saved tensors of the CNN, in file order, with their shapes.
struct Saved {
  std::string name;
  std::vector<std::size_t> shape;
};
const std::vector<Saved>& saved_tensors() {
  static const std::vector<Saved> list = {
      {"conv1.w", {8, 1, 3, 3}},   {"conv1.b", {8}},          {"bn1.gamma", {8}},         {"bn1.beta", {8}},
      {"bn1.running_mean", {8}},   {"bn1.running_var", {8}},  {"conv2.w", {16, 8, 3, 3}}, {"conv2.b", {16}},
      {"bn2.gamma", {16}},         {"bn2.beta", {16}},        {"bn2.running_mean", {16}}, {"bn2.running_var", {16}},
      {"fc.w", {kClasses, kFeatureDim}}, {"fc.b", {kClasses}}};
  return list;
}

nn::Sequential make_model() { return nn::make_cnn(1, kFeatureSide, kFeatureSide, static_cast<int>(kClasses), 0); }

// Every saved tensor of `model`, by name (parameters' master weights and batch norm's running statistics).
std::map<std::string, std::vector<float>> tensors_of(nn::Sequential& model) {
  std::map<std::string, std::vector<float>> out;
  for (nn::Parameter* p : model.parameters()) out[p->name] = p->master;
  for (const auto& layer : model.layers())
    if (const auto* bn = dynamic_cast<const nn::BatchNorm2d*>(layer.get())) {
      out[bn->name() + ".running_mean"] = bn->running_mean();
      out[bn->name() + ".running_var"] = bn->running_var();
    }
  return out;
}

void set_tensors(nn::Sequential& model, std::map<std::string, std::vector<float>>& values) {
  for (nn::Parameter* p : model.parameters()) p->master = std::move(values.at(p->name));
  for (const auto& layer : model.layers())
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get()))
      bn->set_running_statistics(std::move(values.at(bn->name() + ".running_mean")),
                                 std::move(values.at(bn->name() + ".running_var")));
}

// The safetensors header's __metadata__ (the file was validated by the io reader first).
std::map<std::string, std::string> read_metadata(const std::filesystem::path& file) {
  std::ifstream in = io::open_input_file(file);
  unsigned char length_bytes[8] = {};
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[i];
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  std::map<std::string, std::string> out;
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
  if (j.is_object() && j.contains("__metadata__") && j["__metadata__"].is_object())
    for (const auto& [key, value] : j["__metadata__"].items())
      if (value.is_string()) out[key] = value.get<std::string>();
  return out;
}

}  // namespace

FeatureExtractor::FeatureExtractor() : model_(std::make_unique<nn::Sequential>(make_model())) {}
FeatureExtractor::FeatureExtractor(FeatureExtractor&&) noexcept = default;
FeatureExtractor& FeatureExtractor::operator=(FeatureExtractor&&) noexcept = default;
FeatureExtractor::~FeatureExtractor() = default;

FeatureExtractor FeatureExtractor::train(const FeatureExtractorOptions& options,
                                         const std::function<void(std::size_t)>& progress) {
  TrainConfig c;
  c.model = "cnn";
  c.data = "mnist";
  c.data_dir = options.data_dir;
  c.recipe = "fp32";
  c.scaler = "none";
  c.backend = nn::BackendKind::ref;
  c.steps = options.steps;
  c.batch_size = options.batch_size;
  c.seed = options.seed;
  c.recorders = false;
  c.histograms = false;
  Trainer trainer(c);
  for (std::size_t i = 0; i < options.steps; ++i) {
    trainer.step();
    if (progress) progress(i);
  }
  const Evaluation e = trainer.evaluate();
  FeatureExtractor fx;
  auto values = tensors_of(trainer.classifier());
  set_tensors(*fx.model_, values);
  fx.metadata_ = {{"format", kFeatureFormat},
                  {"seed", std::to_string(options.seed)},
                  {"steps", std::to_string(options.steps)},
                  {"batch_size", std::to_string(options.batch_size)},
                  {"test_accuracy", e.to_json()["test_accuracy"].dump()}};
  return fx;
}

void FeatureExtractor::save(const std::filesystem::path& file) const {
  auto values = tensors_of(*model_);
  std::vector<io::FloatTensor> tensors;
  for (const Saved& s : saved_tensors()) tensors.push_back({s.name, s.shape, values.at(s.name)});
  io::write_safetensors(file, tensors, metadata_);
}

FeatureExtractor FeatureExtractor::load(const std::filesystem::path& file) {
  const std::vector<io::FloatTensor> tensors = io::read_safetensors_f32(file);
  FeatureExtractor fx;
  fx.metadata_ = read_metadata(file);
  auto bad = [&](const std::string& what) {
    std::string message = "feature extractor ";
    message += file.string();
    message += ": ";
    message += what;
    message += " (rebuild it with `mpverify feature-extractor --out FILE`)";
    throw std::invalid_argument(message);
  };
  if (fx.metadata_["format"] != kFeatureFormat)
    bad(std::string("metadata format is '") + fx.metadata_["format"] + "', expected '" + kFeatureFormat + "'");
  std::map<std::string, std::vector<float>> values;
  for (const Saved& s : saved_tensors()) {
    const auto it = std::find_if(tensors.begin(), tensors.end(), [&](const io::FloatTensor& t) { return t.name == s.name; });
    if (it == tensors.end()) bad("tensor " + s.name + " is missing");
    if (it->shape != s.shape) bad("tensor " + s.name + " has another shape than the CNN's");
    values[s.name] = it->values;
  }
  if (tensors.size() != saved_tensors().size()) bad("holds tensors the CNN does not have");
  set_tensors(*fx.model_, values);
  return fx;
}

std::vector<float> FeatureExtractor::run(std::span<const float> images, std::size_t layers, std::size_t width) {
  if (images.size() % kPixels != 0)
    throw std::invalid_argument("FeatureExtractor: " + std::to_string(images.size()) +
                                " floats are not a whole number of 28 x 28 images");
  const std::size_t n = images.size() / kPixels;
  nn::RefBackend backend;
  const nn::Precision precision;  // fp32
  nn::Context ctx(backend, precision);
  model_->cast_weights(precision);
  model_->set_training(false);
  std::vector<float> out;
  out.reserve(n * width);
  for (std::size_t first = 0; first < n; first += kChunk) {
    const std::size_t count = std::min(kChunk, n - first);
    nn::Tensor h(static_cast<int>(count), 1, kFeatureSide, kFeatureSide);
    const auto part = images.subspan(first * kPixels, count * kPixels);
    std::copy(part.begin(), part.end(), h.values.begin());
    for (std::size_t i = 0; i < layers; ++i) h = model_->layer(i).forward(ctx, h);
    out.insert(out.end(), h.values.begin(), h.values.end());
  }
  return out;
}

std::vector<float> FeatureExtractor::features(std::span<const float> images) {
  return run(images, kFeatureLayers, kFeatureDim);
}

std::vector<float> FeatureExtractor::logits(std::span<const float> images) {
  return run(images, model_->size(), kClasses);
}

}  // namespace mpverify::training
