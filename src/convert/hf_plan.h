// The tensor plan of an HF -> GGUF conversion (internal to src/convert): which checkpoint tensors
// become which GGUF tensor, with the shape config.json implies. PlanBuilder marks every tensor it
// takes so that hf_convert.cpp can reject checkpoints with tensors nothing maps.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "convert/hf_config.h"
#include "convert/safetensors.h"
#include "format/gguf_writer.h"

namespace cera::convert {

enum class Permute { kNone, kQ, kK };

struct Planned {
  std::string gguf_name;
  const StTensor* src = nullptr;
  std::vector<uint64_t> expected;  // HF order; with `stack`, of the stacked result [n, ...]
  Permute permute = Permute::kNone;
  // MoE experts: one source per expert, stacked along a new outer dimension (src = stack[0]).
  std::vector<const StTensor*> stack;
};

class PlanBuilder {
 public:
  PlanBuilder(const SafetensorsCheckpoint& ckpt, bool permute_qk);

  // Plans `hf` as `gguf` after checking its shape (HF order); a missing optional tensor is skipped.
  Status take(const std::string& hf, std::string gguf, std::vector<uint64_t> shape, bool optional,
              Permute p = Permute::kNone);
  // Like take, for a tensor stored with extra size-1 dimensions: checks `hf_shape`, plans `shape`
  // (same element order), e.g. lfm2's conv kernel [n_embd, 1, L] -> [n_embd, L].
  Status take_squeezed(const std::string& hf, std::string gguf, const std::vector<uint64_t>& hf_shape,
                       std::vector<uint64_t> shape);
  // Plans the tensors `hf` (each of shape `each`) stacked into one GGUF tensor [n, each...].
  Status take_stack(const std::vector<std::string>& hf, std::string gguf, const std::vector<uint64_t>& each);
  void mark_used(const std::string& hf) { used_[hf] = true; }
  bool has(const std::string& hf) const { return ckpt_.find(hf) != nullptr; }
  // Fails naming the first checkpoint tensor nothing took (rotary inv_freq buffers excepted).
  Status check_all_used() const;

  std::vector<Planned>& plan() { return plan_; }

 private:
  Status check(const StTensor& t, const std::string& hf, const std::vector<uint64_t>& shape) const;
  const SafetensorsCheckpoint& ckpt_;
  bool permute_qk_;
  std::vector<Planned> plan_;
  std::map<std::string, bool> used_;
};

// lfm2, lfm2moe, qwen3moe (hf_hybrid.cpp): one layer's tensors, and the architecture's metadata
// beyond what every family writes (per-layer head_count_kv, shortconv, expert keys).
bool is_hybrid_family(HfArch arch);
Status plan_hybrid_layer(PlanBuilder& b, const HfConfig& c, uint32_t layer);
void write_hybrid_metadata(const HfConfig& c, format::GgufWriter& w);

// bert (hf_bert.cpp): the whole tensor plan (embeddings, encoder layers; the pooler marked unused),
// and its metadata: attention.causal, token_type_count, and from the sentence-transformers files
// in `dir` (modules.json, the Pooling module's config.json) pooling_type and embedding.normalize.
Status plan_bert(PlanBuilder& b, const HfConfig& c, std::vector<std::string>& notes);
Status write_bert_metadata(const std::filesystem::path& dir, const HfConfig& c, format::GgufWriter& w,
                           std::vector<std::string>& notes);

}  // namespace cera::convert
