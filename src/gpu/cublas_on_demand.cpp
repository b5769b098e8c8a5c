// cuBLAS and cuBLASLt, opened the first time the GPU side calls them.
//
// Why: their static initializers ran in every process linked with them, whether or not it ever used a GPU:
// about 0.4 s of page faults and allocations over their 600 MB (libcublasLt.so.13 alone is 540 MB) before
// main(), in every run of the program, of a test suite, of an experiment, and in every `import mpverify`.
// cuDNN and the CUDA runtime start in milliseconds and stay linked as usual.
//
// How: this file defines each cuBLAS function the GPU side calls, with the header's own prototype (a
// mismatch is a compile error: an extern "C" function cannot be overloaded), and forwards it to the
// library's symbol, found with dlopen/dlsym on the first call. The libraries are looked up by their soname
// (the search path and the program's RUNPATH, like a linked library), then in the toolkit's directory
// found at configure time. A library that cannot be opened makes every call return
// CUBLAS_STATUS_NOT_INITIALIZED, and cublasGetStatusString says which library failed and why, so the
// GPU side's status checks (gpu/check.h) report it.
#include <dlfcn.h>

#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "gpu/device.h"

#define MPVERIFY_STRINGIFY_(x) #x
#define MPVERIFY_STRINGIFY(x) MPVERIFY_STRINGIFY_(x)

namespace mpverify::gpu {
namespace {

struct OnDemandLibrary {
  void* handle = nullptr;
  std::string error;  // why it could not be opened; empty once open
};

OnDemandLibrary open_library(const std::string& soname) {
  OnDemandLibrary library;
  library.handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library.handle) return library;
  const std::string first_error = dlerror();
  const std::string in_toolkit = std::string(MPVERIFY_CUDA_LIBRARY_DIR) + "/" + soname;
  library.handle = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library.handle) return library;
  library.error = "cannot open " + soname + " (" + first_error + "; also tried " + in_toolkit +
                  "): install the CUDA toolkit's cuBLAS or add its directory to LD_LIBRARY_PATH";
  return library;
}

// Function-local statics: opened once, on the first call, safely from any thread.
OnDemandLibrary& cublas() {
  static OnDemandLibrary library = open_library("libcublas.so." MPVERIFY_STRINGIFY(CUBLAS_VER_MAJOR));
  return library;
}

OnDemandLibrary& cublas_lt() {
  static OnDemandLibrary library = open_library("libcublasLt.so." MPVERIFY_STRINGIFY(CUBLAS_VER_MAJOR));
  return library;
}

void* symbol(OnDemandLibrary& library, const char* name) {
  if (!library.handle) return nullptr;
  return dlsym(library.handle, name);
}

}  // namespace

bool cublas_is_loaded() {
  // RTLD_NOLOAD: a handle only if the library is already in the process (then one more reference to it).
  void* handle = dlopen("libcublasLt.so." MPVERIFY_STRINGIFY(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return false;
  dlclose(handle);
  return true;
}

}  // namespace mpverify::gpu

// One forwarding definition: the prototype in the header (params), the arguments passed on (args).
#define MPVERIFY_CUBLAS_FORWARD(library, name, params, args)                                              \
  cublasStatus_t CUBLASWINAPI name params {                                                              \
    using Function = cublasStatus_t(CUBLASWINAPI*) params;                                               \
    static const auto real = reinterpret_cast<Function>(::mpverify::gpu::symbol(library(), #name));      \
    return real ? real args : CUBLAS_STATUS_NOT_INITIALIZED;                                              \
  }

using mpverify::gpu::cublas;
using mpverify::gpu::cublas_lt;

extern "C" {

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  using Function = const char*(CUBLASWINAPI*)(cublasStatus_t);
  static const auto real = reinterpret_cast<Function>(mpverify::gpu::symbol(cublas(), "cublasGetStatusString"));
  if (real) return real(status);
  return cublas().handle ? "cublasGetStatusString not found in cuBLAS" : cublas().error.c_str();
}

MPVERIFY_CUBLAS_FORWARD(cublas, cublasGetProperty, (libraryPropertyType type, int* value), (type, value))
MPVERIFY_CUBLAS_FORWARD(cublas, cublasCreate_v2, (cublasHandle_t * handle), (handle))
MPVERIFY_CUBLAS_FORWARD(cublas, cublasDestroy_v2, (cublasHandle_t handle), (handle))
MPVERIFY_CUBLAS_FORWARD(cublas, cublasGemmEx,
                        (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                         int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                         cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                         cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                        (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                         computeType, algo))

MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulDescCreate,
                        (cublasLtMatmulDesc_t * desc, cublasComputeType_t computeType, cudaDataType_t scaleType),
                        (desc, computeType, scaleType))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulDescSetAttribute,
                        (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                         size_t sizeInBytes),
                        (desc, attr, buf, sizeInBytes))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatrixLayoutCreate,
                        (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols,
                         int64_t ld),
                        (layout, type, rows, cols, ld))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulPreferenceSetAttribute,
                        (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                         const void* buf, size_t sizeInBytes),
                        (pref, attr, buf, sizeInBytes))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulAlgoGetHeuristic,
                        (cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
                         cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                         cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                         cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount),
                        (handle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
                         heuristicResultsArray, returnAlgoCount))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmulAlgoConfigGetAttribute,
                        (const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                         size_t sizeInBytes, size_t* sizeWritten),
                        (algo, attr, buf, sizeInBytes, sizeWritten))
MPVERIFY_CUBLAS_FORWARD(cublas_lt, cublasLtMatmul,
                        (cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                         const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                         const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                         cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                         size_t workspaceSizeInBytes, cudaStream_t stream),
                        (handle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                         workspaceSizeInBytes, stream))

}  // extern "C"
