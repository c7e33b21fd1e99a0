// libFuzzer target for the GGUF reader: any byte string must parse or fail cleanly, and a file
// that parses must allow every accessor over every key and tensor without leaving its bytes.
#include <cstddef>
#include <cstdint>

#include "format/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = cera::format::GgufFile::parse({reinterpret_cast<const std::byte*>(data), size});
  if (!file.ok()) return 0;
  for (const auto& kv : file->metadata()) {
    (void)file->get<int64_t>(kv.key);
    (void)file->get<double>(kv.key);
    (void)file->get<std::string>(kv.key);
    (void)file->get_array<std::string>(kv.key);
    (void)file->get_array<float>(kv.key);
  }
  volatile uint8_t sink = 0;
  for (const auto& t : file->tensors()) {
    auto bytes = file->tensor_data(t);
    if (!bytes.empty()) sink = sink ^ static_cast<uint8_t>(bytes.back());  // touch the last byte
  }
  return 0;
}
