#include "nn/models.h"

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "nn/activation_layer.h"
#include "nn/batch_norm_layer.h"
#include "nn/conv2d_layer.h"
#include "nn/conv_transpose2d.h"
#include "nn/embedding.h"
#include "nn/layer_norm_layer.h"
#include "nn/linear.h"
#include "nn/max_pool_layer.h"
#include "nn/positional_embedding.h"
#include "nn/reshape.h"
#include "nn/transformer_block.h"

namespace mpverify::nn {

namespace {

// Layer i draws from streams (i << 8) + 0, 1, ...: distinct for up to 256
// streams per layer, and a pure function of the layer's position.
std::uint64_t stream_of(std::size_t layer_index) { return static_cast<std::uint64_t>(layer_index) << 8; }

void require_positive(std::initializer_list<std::pair<const char*, int>> dims, const char* model) {
  for (const auto& [what, value] : dims) {
    if (value >= 1) continue;
    std::string message = model;
    message += ": ";
    message += what;
    message += " must be >= 1, got ";
    message += std::to_string(value);
    throw std::invalid_argument(message);
  }
}

ops::ActivationParams relu() { return {ops::Activation::relu, 0.0}; }
ops::ActivationParams leaky_relu(double slope) { return {ops::Activation::leaky_relu, slope}; }
ops::ActivationParams tanh_activation() { return {ops::Activation::tanh, 0.0}; }

constexpr double kDiscriminatorSlope = 0.2;  // DCGAN's LeakyReLU

}  // namespace

Sequential make_mlp(int channels, int height, int width, int classes, int hidden, std::uint64_t seed) {
  require_positive({{"channels", channels}, {"height", height}, {"width", width}, {"classes", classes},
                    {"hidden", hidden}},
                   "make_mlp");
  Sequential m("mlp");
  m.add<Linear>("fc1", channels * height * width, hidden, seed, stream_of(m.size()));
  m.add<ActivationLayer>("relu1", relu());
  m.add<Linear>("fc2", hidden, classes, seed, stream_of(m.size()));
  return m;
}

Sequential make_mlp(int channels, int height, int width, int classes, std::uint64_t seed) {
  return make_mlp(channels, height, width, classes, kMlpHidden, seed);
}

Sequential make_cnn(int channels, int height, int width, int classes, std::uint64_t seed) {
  require_positive({{"channels", channels}, {"classes", classes}}, "make_cnn");
  if (height < 4 || width < 4) {
    std::string message = "make_cnn: the two 2x2 poolings need images of at least 4 x 4, got ";
    message += std::to_string(height);
    message += " x ";
    message += std::to_string(width);
    throw std::invalid_argument(message);
  }
  Sequential m("cnn");
  m.add<Conv2d>("conv1", channels, 8, 3, 1, 1, seed, stream_of(m.size()));
  m.add<BatchNorm2d>("bn1", 8);
  m.add<ActivationLayer>("relu1", relu());
  m.add<MaxPool2d>("pool1", 2, 2);
  m.add<Conv2d>("conv2", 8, 16, 3, 1, 1, seed, stream_of(m.size()));
  m.add<BatchNorm2d>("bn2", 16);
  m.add<ActivationLayer>("relu2", relu());
  m.add<MaxPool2d>("pool2", 2, 2);
  m.add<Linear>("fc", 16 * (height / 2 / 2) * (width / 2 / 2), classes, seed, stream_of(m.size()));
  return m;
}

Sequential make_transformer(int vocab, int context_length, int d_model, int heads, int layers, std::uint64_t seed) {
  require_positive({{"vocab", vocab}, {"context_length", context_length}, {"d_model", d_model}, {"heads", heads},
                    {"layers", layers}},
                   "make_transformer");
  if (d_model % heads != 0) {
    std::string message = "make_transformer: heads (";
    message += std::to_string(heads);
    message += ") must divide d_model (";
    message += std::to_string(d_model);
    message += ")";
    throw std::invalid_argument(message);
  }
  Sequential m("transformer");
  m.add<Embedding>("tok_emb", vocab, d_model, seed, stream_of(m.size()));
  m.add<PositionalEmbedding>("pos_emb", context_length, d_model, seed, stream_of(m.size()));
  for (int i = 0; i < layers; ++i) {
    std::string block = "h";
    block += std::to_string(i);
    m.add<TransformerBlock>(block, d_model, heads, context_length, seed, stream_of(m.size()));
  }
  m.add<LayerNorm>("ln_f", d_model);
  m.add<Linear>("head", d_model, vocab, seed, stream_of(m.size()));
  return m;
}

Sequential make_transformer(int vocab, int context_length, std::uint64_t seed) {
  return make_transformer(vocab, context_length, kTransformerDModel, kTransformerHeads, kTransformerLayers, seed);
}

Dcgan make_dcgan(int image_size, int latent, std::uint64_t seed) {
  if (image_size < 4 || image_size % 4 != 0) {
    std::string message = "make_dcgan: image_size ";
    message += std::to_string(image_size);
    message += " is not supported; the generator doubles a b x b map twice, so use a positive multiple of 4 (28 for "
               "MNIST)";
    throw std::invalid_argument(message);
  }
  require_positive({{"latent", latent}}, "make_dcgan");
  const int b = image_size / 4;
  Dcgan gan{Sequential("generator"), Sequential("discriminator"), latent, image_size};
  Sequential& g = gan.generator;
  Sequential& d = gan.discriminator;
  // The pair's layers are numbered together, the discriminator's after the
  // generator's, so that no two layers share a stream.
  auto stream = [&] { return stream_of(g.size() + d.size()); };
  g.add<Linear>("g.fc", latent, 64 * b * b, seed, stream());
  g.add<BatchNorm2d>("g.bn1", 64 * b * b);
  g.add<ActivationLayer>("g.relu1", relu());
  g.add<Reshape>("g.reshape", 64, b, b);
  g.add<ConvTranspose2d>("g.deconv1", 64, 32, 4, 2, 1, seed, stream());
  g.add<BatchNorm2d>("g.bn2", 32);
  g.add<ActivationLayer>("g.relu2", relu());
  g.add<ConvTranspose2d>("g.deconv2", 32, 1, 4, 2, 1, seed, stream());
  g.add<ActivationLayer>("g.tanh", tanh_activation());
  d.add<Conv2d>("d.conv1", 1, 32, 4, 2, 1, seed, stream());
  d.add<ActivationLayer>("d.lrelu1", leaky_relu(kDiscriminatorSlope));
  d.add<Conv2d>("d.conv2", 32, 64, 4, 2, 1, seed, stream());
  d.add<BatchNorm2d>("d.bn2", 64);
  d.add<ActivationLayer>("d.lrelu2", leaky_relu(kDiscriminatorSlope));
  d.add<Linear>("d.fc", 64 * b * b, 1, seed, stream());
  return gan;
}

Dcgan make_dcgan(std::uint64_t seed) { return make_dcgan(kDcganImageSize, kDcganLatent, seed); }

}  // namespace mpverify::nn
