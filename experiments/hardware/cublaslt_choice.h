// Which algorithm cuBLASLt's heuristic picks for the hardware experiment's fp16 and bf16 GEMMs (fp32
// accumulation and output), read from the algorithm's configuration (gpu/gemm_lt_gpu.h), and whether a
// chain of Hopper's instruction split as that algorithm splits K reproduces it. The open question it
// answers: at k = 4096 no in-order candidate reproduced cuBLAS, so which split and which reduction is it?
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mpverify::experiments {

// The report's section and its JSON (null without a GPU, when the section says the question is open).
std::string cublaslt_section(bool use_gpu, std::uint64_t seed, nlohmann::ordered_json& json);

}  // namespace mpverify::experiments
