# test_ops_cuda: every CUDA Backend verb against the CPU backend (included from src/ops/cuda).
find_package(GTest REQUIRED)
file(GLOB cuda_test_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/ops_cuda/*.cpp)
add_executable(test_ops_cuda ${cuda_test_sources})
target_link_libraries(test_ops_cuda PRIVATE cera_ops_cuda cera_ops_cpu cera_quant GTest::gtest_main cera_warnings)
