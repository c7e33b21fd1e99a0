// Checks for invariants (programming errors, not bad input). A failed check throws CheckFailure
// carrying the source location; the library never exits the process, the API layer catches.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace cera {

class CheckFailure : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void check_failed(const char* condition, const std::string& detail,
                               std::source_location where = std::source_location::current());

}  // namespace cera

#define CERA_CHECK(cond)                                      \
  do {                                                        \
    if (!(cond)) [[unlikely]] ::cera::check_failed(#cond, {}); \
  } while (0)

#define CERA_CHECK_MSG(cond, msg)                              \
  do {                                                         \
    if (!(cond)) [[unlikely]] ::cera::check_failed(#cond, (msg)); \
  } while (0)
