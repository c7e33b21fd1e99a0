// The web chat page's static files, embedded into the binary at build time from apps/server/web/
// (CMake writes web_assets.cpp), so `cera serve` needs no files beside it and fetches nothing.
#pragma once

#include <span>
#include <string_view>

namespace cera::server {

struct WebAsset {
  std::string_view path;          // "/", "/app.js", "/style.css"
  std::string_view content_type;  // with its charset
  std::string_view body;
};

std::span<const WebAsset> web_assets();

}  // namespace cera::server
