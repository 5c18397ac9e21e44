# CUDA is compiled whenever nvcc exists, so the CUDA build path is exercised on machines without a GPU.
set(KILN_HAVE_CUDA OFF)
if(KILN_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper; widen with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 does not know C++20 for nvcc 13; CUDA sources stay C++17
    find_package(CUDAToolkit REQUIRED)
    set(KILN_HAVE_CUDA ON)
    # CUTLASS's headers: -DKILN_CUTLASS_DIR=<dir with include/ and tools/util/include/>, else pip's nvidia-cutlass.
    if(NOT KILN_CUTLASS_DIR)
      find_package(Python3 COMPONENTS Interpreter QUIET)
      if(Python3_EXECUTABLE)
        execute_process(COMMAND ${Python3_EXECUTABLE} -c
                        "import importlib.util as u, os; s = u.find_spec('cutlass_library'); print(os.path.join(os.path.dirname(s.origin), 'source') if s else '')"
                        OUTPUT_VARIABLE KILN_CUTLASS_DIR OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      endif()
    endif()
    set(KILN_CUTLASS_INCLUDE_DIRS "")
    if(KILN_CUTLASS_DIR AND EXISTS "${KILN_CUTLASS_DIR}/include/cutlass/cutlass.h"
       AND EXISTS "${KILN_CUTLASS_DIR}/tools/util/include/cutlass/util/packed_stride.hpp")
      set(KILN_CUTLASS_INCLUDE_DIRS "${KILN_CUTLASS_DIR}/include" "${KILN_CUTLASS_DIR}/tools/util/include")
    endif()
    message(STATUS "kiln: CUDA backend enabled (${CMAKE_CUDA_COMPILER_VERSION}, sm_${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "kiln: nvcc not found, CUDA backend disabled")
  endif()
endif()
