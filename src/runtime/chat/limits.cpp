// The one spelling of limit errors, so every bound reads the same and names its field.
#include "runtime/chat/limits.h"

#include <string>

namespace cera::runtime::chat {

Status limit_error(std::string_view what, uint64_t limit, std::string_view unit,
                   std::string_view field) {
  return out_of_range(std::string(what) + " than the limit of " + std::to_string(limit) + " " +
                      std::string(unit) + " (TemplateLimits::" + std::string(field) + ")");
}

Status limit_error(SourcePos pos, std::string_view what, uint64_t limit, std::string_view unit,
                   std::string_view field) {
  return out_of_range("chat template " + to_string(pos) + ": " +
                      limit_error(what, limit, unit, field).message());
}

}  // namespace cera::runtime::chat
