// A layer: forward and backward over a backend, and its parameters.
//
// A layer keeps what its backward needs (its input, or its output) from the
// last forward. Backward receives dy (already scaled by the loss scale and
// stored in the activation-gradient format) and returns dx, and accumulates
// nothing: it overwrites each parameter's grad (one backward per step).
#pragma once

#include <string>
#include <vector>

#include "nn/context.h"
#include "nn/tensor.h"

namespace mpverify::nn {

enum class ParameterKind { weight, norm };  // norm: batch-norm gamma and beta (norm_parameters format)

struct Parameter {
  std::string name;            // "<layer>.w", "<layer>.b", "<layer>.gamma", ...
  ParameterKind kind = ParameterKind::weight;
  std::vector<float> master;   // what the optimizer updates (Precision::master, or norm_parameters)
  std::vector<float> value;    // what the layers compute with: master rounded to Precision::weights
  std::vector<float> grad;     // scaled by the loss scale, in Precision::weight_grads
  std::vector<float> state_m, state_v;  // optimizer state (momentum / Adam's m and v), fp32
  std::int64_t steps = 0;      // optimizer steps applied (Adam's t)
  std::size_t size() const { return master.size(); }
};

class Layer {
 public:
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  virtual Tensor forward(Context& ctx, const Tensor& x) = 0;
  // need_dx false: the first layer, whose input gradient nobody reads.
  virtual Tensor backward(Context& ctx, const Tensor& dy, bool need_dx) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }

  // Training mode (the default) or evaluation mode, as PyTorch's
  // module.train() / module.eval(): only batch norm behaves differently (it
  // normalises with its running statistics and updates nothing). A container
  // passes the mode on to its layers.
  virtual void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }

 protected:
  explicit Layer(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
  bool training_ = true;
};

// value <- master rounded to the weight format (norm parameters: to
// norm_parameters), nearest-even; the step's cast of the master weights.
void cast_weights(Parameter& p, const Precision& precision);

}  // namespace mpverify::nn
