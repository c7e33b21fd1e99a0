#include "core/check.h"

namespace cera {

void check_failed(const char* condition, const std::string& detail, std::source_location where) {
  std::string message = std::string("check failed: ") + condition + " at " + where.file_name() +
                        ":" + std::to_string(where.line());
  if (!detail.empty()) message += ": " + detail;
  throw CheckFailure(message);
}

}  // namespace cera
