// The three models of the training runs, built from a seed: the same seed
// gives bitwise the same parameters (every layer draws from its own Philox
// streams, numbered by its position: layer i uses streams from i << 8 up).
//
//  - MLP: fc1 (c h w -> hidden), relu1, fc2 (hidden -> classes).
//  - CNN: conv1 (c -> 8, 3x3, pad 1), bn1, relu1, pool1 (2x2, stride 2),
//         conv2 (8 -> 16, 3x3, pad 1), bn2, relu2, pool2, fc (16 (h/4) (w/4)
//         -> classes). 28 x 28 -> 14 x 14 -> 7 x 7.
//  - DCGAN (image size S = 4 b; 28: b = 7):
//      generator: g.fc (latent -> 64 b b), g.bn1, g.relu1, g.reshape (64 x b x b),
//                 g.deconv1 (64 -> 32, 4x4, stride 2, pad 1: b -> 2b), g.bn2,
//                 g.relu2, g.deconv2 (32 -> 1: 2b -> 4b), g.tanh; its images
//                 are in [-1, 1], so the caller maps [0, 1] data to [-1, 1];
//      discriminator: d.conv1 (1 -> 32, 4x4, stride 2, pad 1: 4b -> 2b),
//                 d.lrelu1 (slope 0.2), d.conv2 (32 -> 64: 2b -> b), d.bn2,
//                 d.lrelu2, d.fc (64 b b -> 1): a logit (BCE with logits).
//  - Transformer (a character-level language model, GPT-2's layout without
//    dropout): tok_emb (nn::Embedding, vocab -> d), pos_emb
//    (nn::PositionalEmbedding, T = context_length positions), blocks h0 ..
//    h{layers-1} (nn::TransformerBlock: pre-LN causal self-attention with
//    `heads` heads, and a GELU MLP of width 4 d), ln_f (nn::LayerNorm), head
//    (nn::Linear d -> vocab, with bias), the model's last matrix layer.
//    Its input is B*T x 1 token ids held as floats (nn/embedding.h), B
//    sequences of exactly T tokens one after the other; its logits B*T x vocab,
//    row b T + t predicting the token after position t of sequence b. The
//    nested matrix layers are listed by nn::matrix_layer_names (nn/matrix_layers.h).
// Every model's logits are n x classes x 1 x 1 (n x 1 for the discriminator).
#pragma once

#include <cstdint>

#include "nn/sequential.h"

namespace mpverify::nn {

inline constexpr int kMlpHidden = 128;
inline constexpr int kDcganImageSize = 28;
inline constexpr int kDcganLatent = 32;

// Throws std::invalid_argument for a dimension < 1.
Sequential make_mlp(int channels, int height, int width, int classes, int hidden, std::uint64_t seed);
Sequential make_mlp(int channels, int height, int width, int classes, std::uint64_t seed);  // hidden 128

// Throws std::invalid_argument unless height and width are >= 4 (two poolings).
Sequential make_cnn(int channels, int height, int width, int classes, std::uint64_t seed);

inline constexpr int kTransformerDModel = 64;
inline constexpr int kTransformerHeads = 4;
inline constexpr int kTransformerLayers = 2;

// Throws std::invalid_argument for a size < 1, or unless heads divides d_model.
Sequential make_transformer(int vocab, int context_length, int d_model, int heads, int layers, std::uint64_t seed);
// d_model 64, 4 heads, 2 layers.
Sequential make_transformer(int vocab, int context_length, std::uint64_t seed);

struct Dcgan {
  Sequential generator, discriminator;
  int latent = kDcganLatent;  // the generator's input: n x latent x 1 x 1
  int image_size = kDcganImageSize;
};
// Throws std::invalid_argument unless image_size is a positive multiple of 4
// (28 is the MNIST size) and latent >= 1.
Dcgan make_dcgan(int image_size, int latent, std::uint64_t seed);
Dcgan make_dcgan(std::uint64_t seed);  // 28 x 28 images, latent 32

}  // namespace mpverify::nn
