#include "core/check.h"

namespace cera {

void check_failed(const char* condition, const std::string& detail, const char* file, int line) {
  std::string message = std::string("check failed: ") + condition + " at " + file + ":" +
                        std::to_string(line);
  if (!detail.empty()) message += ": " + detail;
  throw CheckFailure(message);
}

}  // namespace cera
