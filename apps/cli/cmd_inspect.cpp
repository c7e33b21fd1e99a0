#include "commands.h"
namespace cera::cli {
void register_inspect(CLI::App&) {}
}  // namespace cera::cli
