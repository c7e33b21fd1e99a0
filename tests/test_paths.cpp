#include "test_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace cera::test {

// CERA_SOURCE_DIR in the environment overrides the build's path: binaries built here and run on
// another machine (scripts/cuda-check.sh parity) find the fixtures in that machine's checkout.
std::filesystem::path source_dir() {
  if (const char* env = std::getenv("CERA_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  return CERA_SOURCE_DIR;
}

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("CERA_SHARED_DIR"); env != nullptr && *env != '\0') return env;
  return CERA_SHARED_DIR_DEFAULT;
}

std::filesystem::path binary_dir() { return CERA_BINARY_DIR; }

std::filesystem::path temp_dir() {
  static const std::filesystem::path dir = [] {
    auto p = std::filesystem::temp_directory_path() / ("cera-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return dir;
}

}  // namespace cera::test
