// Where `make models` (scripts/pull-model.sh) installs the real models: $CERA_CACHE_DIR/models,
// else $XDG_CACHE_HOME/cera/models, else ~/.cache/cera/models. Header-only for any test binary.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace cera::test {

inline std::filesystem::path model_cache() {
  if (const char* dir = std::getenv("CERA_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return std::filesystem::path(dir) / "models";
  }
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base = xdg != nullptr && *xdg != '\0'
                                         ? std::filesystem::path(xdg)
                                         : std::filesystem::path(home != nullptr ? home : "/") / ".cache";
  return base / "cera" / "models";
}

}  // namespace cera::test
