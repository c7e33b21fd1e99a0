// Where tests find data: the repository (committed fixtures), shared/ (models and tokenizer
// fixtures that are never committed) and the build tree (the cera binary for app tests).
#pragma once

#include <filesystem>

namespace cera::test {

std::filesystem::path source_dir();  // repository root
std::filesystem::path shared_dir();  // $CERA_SHARED_DIR, else ../shared beside the repository
std::filesystem::path binary_dir();  // the CMake build tree
std::filesystem::path temp_dir();    // a fresh folder for this test process

}  // namespace cera::test
