#pragma once
// `mpverify eval --op dot`: the tensor-core models (emu/mma_presets.h) as a calculator in TestFloat's
// spirit. Each input line: K hex A operands, K hex B operands, c, optionally the expected d; K a positive
// multiple of the instruction's k (a multiple chains instructions in order of increasing K).
#include <string>

namespace mpverify::cli {

struct DotOptions {
  std::string arch;                    // volta..blackwell, a preset's name, or "custom"
  std::string a_format, b_format, c_format;
  int promotion_interval = 0;          // elements of K between fp32 promotions; 0: none
  int custom_k = 0, custom_fraction_bits = 0;  // --arch custom
  bool custom_split = false;
  std::string custom_output;           // fp32-rz, e8m13-rz, fp16-rne
  std::string device = "cpu";          // cpu (the model) or gpu (the probe kernel)
  bool check = false, json = false, list = false;
};

// Reads the lines from standard input; returns the exit code (0, or 1 when --check found a mismatch).
// Throws UsageError for bad options or a malformed line (nothing is printed then).
int run_eval_dot(const DotOptions& o);

}  // namespace mpverify::cli
