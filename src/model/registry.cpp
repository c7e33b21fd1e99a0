// The architecture registry: general.architecture -> Arch (one string table, arch.cpp) -> loader.
#include "model/archs.h"
#include "ops/collective.h"

namespace cera::model {

Result<std::unique_ptr<Model>> load_model(const format::GgufFile& file, ops::Backend& backend,
                                          const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const std::string name, file.get<std::string>("general.architecture"));
  const std::optional<Arch> arch = arch_from_name(name);
  if (!arch) return unsupported("architecture '" + name + "' (supported: llama, qwen2, qwen3, granite, gemma3, lfm2, lfm2moe, qwen3moe, bert)");
  if (options.max_batch_tokens <= 0) return invalid_argument("max_batch_tokens must be > 0");
  CERA_RETURN_IF_ERROR(check_shard_spec(options.shard));
  if (options.shard.split()) {
    if (options.collective == nullptr || options.collective->rank() != options.shard.rank ||
        options.collective->n_ranks() != options.shard.n_ranks) {
      return invalid_argument("tensor-parallel rank " + std::to_string(options.shard.rank) + " of " +
                              std::to_string(options.shard.n_ranks) +
                              " needs a collective endpoint of that rank and rank count");
    }
    if (*arch == Arch::kBert) {
      return unsupported("tensor parallelism is for decoder models; bert (an encoder) runs on one device");
    }
  }
  switch (*arch) {
    case Arch::kLlama: return load_llama(file, backend, options);
    case Arch::kQwen2: return load_qwen2(file, backend, options);
    case Arch::kQwen3: return load_qwen3(file, backend, options);
    case Arch::kGranite: return load_granite(file, backend, options);
    case Arch::kGemma3: return load_gemma3(file, backend, options);
    case Arch::kLfm2: return load_lfm2(file, backend, options);
    case Arch::kLfm2Moe: return load_lfm2moe(file, backend, options);
    case Arch::kQwen3Moe: return load_qwen3moe(file, backend, options);
    case Arch::kBert: return load_bert(file, backend, options);
  }
  return unsupported("architecture '" + name + "'");
}

}  // namespace cera::model
