#include "model/arch.h"

#include <array>
#include <utility>

namespace cera::model {
namespace {
constexpr std::array<std::pair<Arch, std::string_view>, 9> kNames = {{
    {Arch::kLlama, "llama"},
    {Arch::kQwen2, "qwen2"},
    {Arch::kQwen3, "qwen3"},
    {Arch::kGranite, "granite"},
    {Arch::kGemma3, "gemma3"},
    {Arch::kLfm2, "lfm2"},
    {Arch::kLfm2Moe, "lfm2moe"},
    {Arch::kQwen3Moe, "qwen3moe"},
    {Arch::kBert, "bert"},
}};
}  // namespace

std::optional<Arch> arch_from_name(std::string_view gguf_name) {
  for (const auto& [arch, name] : kNames) {
    if (name == gguf_name) return arch;
  }
  return std::nullopt;
}

std::string_view arch_name(Arch arch) {
  for (const auto& [a, name] : kNames) {
    if (a == arch) return name;
  }
  return "?";
}

}  // namespace cera::model
