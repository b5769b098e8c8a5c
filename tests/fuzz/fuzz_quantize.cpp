// `mpverify quantize`'s input: a tensor named on the command line (cli::read_tensor_argument: FILE.npy,
// FILE.npz[:NAME], FILE.safetensors[:NAME]), quantized in blocks (emu::block_quantize) along an axis.
// Input: byte 0 picks the file type (bits 0-1), whether a name is given (bit 2) and the scheme (the rest);
// byte 1 is the axis (signed); the rest is the file.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/tensor_argument.h"
#include "emu/block_quantize.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mpverify;
  if (size < 2) return 0;
  const char* extensions[] = {".npy", ".npz", ".safetensors", ".safetensors"};
  const auto file = fuzz::scratch().fresh() / (std::string("w") + extensions[data[0] & 3]);
  fuzz::write_file(file, fuzz::text_of(data + 2, size - 2));
  const std::string argument = file.string() + ((data[0] & 4) && (data[0] & 3) ? ":w" : "");
  cli::TensorArgument t;
  try {
    t = cli::read_tensor_argument(argument, "quantize");
  } catch (const cli::UsageError&) {
    return 0;
  }
  if (t.values.size() > (1u << 16)) return 0;
  const auto schemes = emu::block_schemes();
  const emu::BlockScheme& scheme = schemes[(data[0] >> 3) % schemes.size()];
  const int axis = static_cast<std::int8_t>(data[1]);
  try {  // the command turns std::invalid_argument into its exit 2 (cli::with_usage_errors)
    const emu::BlockQuantized q = emu::block_quantize(t.values, t.shape, axis, scheme);
    (void)q;
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
