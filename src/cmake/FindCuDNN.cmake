# cuDNN is not part of CMake's CUDAToolkit package: this makes the imported
# target mpverify::cudnn from the header and library next to the toolkit (or
# under CUDNN_ROOT). Used by the build and by the installed package config.
if(NOT TARGET mpverify::cudnn)
  find_path(MPVERIFY_CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda /usr
    PATH_SUFFIXES include include/x86_64-linux-gnu)
  # libcudnn.so.9: the nvidia-cudnn wheels (PyTorch's images) ship no unversioned name
  find_library(MPVERIFY_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
    HINTS ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda /usr
    PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  if(NOT MPVERIFY_CUDNN_INCLUDE_DIR OR NOT MPVERIFY_CUDNN_LIBRARY)
    message(FATAL_ERROR "cuDNN not found next to the CUDA toolkit; set CUDNN_ROOT, "
                        "or configure with -DMPVERIFY_CUDA=OFF to build without the GPU side")
  endif()
  add_library(mpverify::cudnn UNKNOWN IMPORTED)
  set_target_properties(mpverify::cudnn PROPERTIES
    IMPORTED_LOCATION "${MPVERIFY_CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MPVERIFY_CUDNN_INCLUDE_DIR}")
endif()
