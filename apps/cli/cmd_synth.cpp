// Placeholder until `cera synth` lands.
#include "commands.h"
namespace cera::cli {
void register_synth(CLI::App&) {}
}  // namespace cera::cli
