# Sanitizer and fuzzing builds (docs/fuzzing.md).
#
# MPVERIFY_SANITIZE: AddressSanitizer and UndefinedBehaviorSanitizer on the
# whole build (library, program, unit and property suites), gcc or clang.
# MPVERIFY_FUZZ: the libFuzzer targets of tests/fuzz/ (clang only): the
# library is compiled with -fsanitize=fuzzer-no-link (coverage for libFuzzer,
# no main) plus ASan and UBSan, the targets link -fsanitize=fuzzer. The GPU
# side and the Python module are off in both: nvcc does not take these flags,
# and an ASan-instrumented extension module cannot be loaded by an
# uninstrumented python. Any UBSan report stops the program
# (-fno-sanitize-recover), so that a test or a fuzzer sees it as a failure.
# -ffp-contract=off stays (the top-level CMakeLists sets it) and nothing here
# enables fast-math.
option(MPVERIFY_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(MPVERIFY_FUZZ "Build the libFuzzer targets of tests/fuzz/ (clang; implies the sanitizers)" OFF)

if(MPVERIFY_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR
    "MPVERIFY_FUZZ=ON needs clang with libFuzzer (compiler here: ${CMAKE_CXX_COMPILER_ID} "
    "${CMAKE_CXX_COMPILER_VERSION}). Install it (Debian: apt-get install clang-16 libclang-rt-16-dev) and "
    "configure a fresh build directory with -DCMAKE_CXX_COMPILER=clang++-16.")
endif()

# MPVERIFY_SANITIZED: either option is on (tests/CMakeLists.txt leaves some suites out of such a build).
set(MPVERIFY_SANITIZED OFF)
if(MPVERIFY_SANITIZE OR MPVERIFY_FUZZ)
  set(MPVERIFY_SANITIZED ON)
  foreach(option MPVERIFY_CUDA MPVERIFY_PYTHON)
    if(${option})
      message(STATUS "mpverify: ${option} off in a sanitizer build")
      set(${option} OFF CACHE BOOL "" FORCE)
      set(${option} OFF)
    endif()
  endforeach()
  set(mpverify_sanitizers address,undefined)
  if(MPVERIFY_FUZZ)
    set(mpverify_sanitizers fuzzer-no-link,address,undefined)
  endif()
  # GCC 12 miscompiles a loop that both -fsanitize=shift and -fsanitize=bounds instrument: the 16 passes of
  # `mask |= (v[i] == -1 ? 1 : 0) << i` over `const int v[16]` index v far out of bounds (a standalone
  # reproducer fails at -O0 and -O2; either check alone, or clang, is right). With GCC, UBSan's bounds
  # check is left out: AddressSanitizer still catches out-of-bounds reads and writes of arrays.
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=${mpverify_sanitizers}>"
    "$<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize-recover=undefined>"
    "$<$<COMPILE_LANGUAGE:CXX,C>:-fno-omit-frame-pointer>")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")  # after -fsanitize=undefined, which it narrows
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX,C>:-fno-sanitize=bounds>")
  endif()
  add_link_options(-fsanitize=address,undefined)
endif()

# mpverify_fuzz_link(<target>): links a fuzz target with libFuzzer's main.
function(mpverify_fuzz_link target)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
endfunction()
