# fvi_linalg: how everything that uses Eigen in this project does its linear algebra, so that
# libfvi, the tests, the benchmarks and generated programs agree (mixing these settings in one
# binary would break Eigen's one-definition rule and alignment):
#   - matrix products through OpenBLAS (Debian's libopenblas-dev): Eigen with EIGEN_USE_BLAS calls
#     dgemm/sgemm for every product large enough to leave Eigen's coefficient-based path;
#   - code generated for this machine's vector units (-march=native; FVIC_NATIVE_ARCH=OFF for a
#     portable build), which Eigen's elementwise kernels need to use AVX2 and FMA. AVX-512 is
#     left to OpenBLAS (which picks its kernels at run time): with it, GCC 12 warns "'__Y' may be
#     used uninitialized" inside its own avx512fintrin.h in every file that includes Eigen (GCC
#     bug 105593, fixed in GCC 13).
option(FVIC_NATIVE_ARCH "Compile for the build machine's CPU (-march=native)" ON)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)

# The flags as plain lists too, for what compiles generated code outside CMake (`fvic build`,
# bench/bench_compile): FVI_LINALG_CXXFLAGS, and FVI_LINALG_LIBS to link.
set(FVI_LINALG_ARCH)
if(FVIC_NATIVE_ARCH)
  list(APPEND FVI_LINALG_ARCH -march=native)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    list(APPEND FVI_LINALG_ARCH -mno-avx512f)
  endif()
endif()
set(FVI_LINALG_CXXFLAGS -DEIGEN_USE_BLAS ${FVI_LINALG_ARCH})
set(FVI_LINALG_LIBS ${BLAS_LIBRARIES})

add_library(fvi_linalg INTERFACE)
target_compile_definitions(fvi_linalg INTERFACE EIGEN_USE_BLAS)
target_compile_options(fvi_linalg INTERFACE ${FVI_LINALG_ARCH})
target_link_libraries(fvi_linalg INTERFACE BLAS::BLAS)
