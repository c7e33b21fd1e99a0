// Placeholder until the owner of this command lands it.
#include "commands.h"
namespace cera::cli {
void register_tokenize(CLI::App&) {}
}  // namespace cera::cli
