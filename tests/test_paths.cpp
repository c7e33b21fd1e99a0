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

std::filesystem::path binary_dir() {
  return CERA_BINARY_DIR;
}

namespace {

// The folder goes with the process that made it (ctest runs a process per test: ~800 folders a
// run were left in /tmp otherwise). Only that process removes it: a forked child that exits
// normally must not take its parent's files away.
struct OwnedTempDir {
  std::filesystem::path path;
  pid_t owner;
  OwnedTempDir()
      : path(std::filesystem::temp_directory_path() / ("cera-test-" + std::to_string(::getpid()))),
        owner(::getpid()) {
    std::filesystem::create_directories(path);
  }
  ~OwnedTempDir() {
    if (::getpid() != owner) return;
    std::error_code ec;  // a destructor must not throw; what cannot be removed stays
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::filesystem::path temp_dir() {
  static const OwnedTempDir dir;
  return dir.path;
}

}  // namespace cera::test
