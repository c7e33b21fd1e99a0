// Checks for invariants (programming errors, not bad input). A failed check throws CheckFailure
// carrying the source location; the library never exits the process, the API layer catches.
#pragma once

#include <stdexcept>
#include <string>

namespace cera {

class CheckFailure : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// File and line come from the macros (std::source_location is missing in clang 14 with
// libstdc++ 12, which the fuzz build uses).
[[noreturn]] void check_failed(const char* condition, const std::string& detail, const char* file,
                               int line);

}  // namespace cera

#define CERA_CHECK(cond)                                      \
  do {                                                        \
    if (!(cond)) [[unlikely]] ::cera::check_failed(#cond, {}, __FILE__, __LINE__); \
  } while (0)

#define CERA_CHECK_MSG(cond, msg)                              \
  do {                                                         \
    if (!(cond)) [[unlikely]] ::cera::check_failed(#cond, (msg), __FILE__, __LINE__); \
  } while (0)
