// Reading a whole small file (a JSON config, a tokenizer file) into memory, safely: only regular
// files (a FIFO would block, a device such as /dev/zero never ends) and only up to a stated size,
// so a hostile or mistaken path ends in an error that names it instead of exhausting memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/status.h"

namespace cera {

// The bytes of the regular file at `path`. Errors name the path: what it is when it is not a
// regular file, and the limit (`what_to_raise` says how) when it holds more than max_bytes.
Result<std::string> read_file(const std::filesystem::path& path, uint64_t max_bytes,
                              std::string_view what_to_raise = {});

// "a directory", "a FIFO (named pipe)", "a character device", ...: what a non-regular file is.
const char* file_type_name(unsigned mode);

}  // namespace cera
