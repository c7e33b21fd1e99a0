// A read-only memory map of a whole file. Weights are used in place from the map, so the
// MappedFile must outlive every view into it; it is move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "core/status.h"

namespace cera {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }

 private:
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace cera
