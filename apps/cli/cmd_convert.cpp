#include "commands.h"
namespace cera::cli {
void register_convert(CLI::App&) {}
}  // namespace cera::cli
