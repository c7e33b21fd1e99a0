// The closed set of model architectures and the one table that maps GGUF's
// general.architecture strings onto it.
#pragma once

#include <optional>
#include <string_view>

namespace cera::model {

enum class Arch { kLlama, kQwen2, kQwen3, kGranite, kGemma3, kLfm2, kLfm2Moe, kQwen3Moe, kBert };

std::optional<Arch> arch_from_name(std::string_view gguf_name);
std::string_view arch_name(Arch arch);  // the GGUF spelling, also the metadata key prefix

}  // namespace cera::model
