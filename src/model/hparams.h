// Hyper-parameters read once from GGUF metadata and validated. Everything an architecture
// file needs is here as numbers and enums; no code after loading looks at a metadata string.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "model/arch.h"
#include "ops/backend.h"

namespace cera::model {

struct HParams {
  Arch arch = Arch::kLlama;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;   // key_length (value_length must match)
  int32_t n_ff = 0;
  float rms_eps = 1e-5f;
  ops::RopeKind rope_kind = ops::RopeKind::kNorm;
  int32_t n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  // Scalars some architectures set (defaults are the identity).
  float embedding_scale = 1.0f;
  float attention_scale = 0.0f;  // 0: 1/sqrt(head_dim)
  float residual_scale = 1.0f;
  float logit_scale = 1.0f;      // logits are divided by it
  float final_logit_softcap = 0.0f;  // 0: none; else logits = cap * tanh(logits / cap)
  // Interleaved sliding-window attention (gemma3): swa_layers[il] says whether layer il is local.
  int32_t sliding_window = 0;
  std::vector<bool> swa_layers;
  float rope_freq_base_swa = 10000.0f;  // local layers' RoPE base (no scaling)
  // Hybrid layers (lfm2, lfm2moe): head_count_kv per layer, 0 marking a short-convolution layer
  // (n_head_kv is then the largest entry); empty for the other families.
  std::vector<int32_t> n_head_kv_layer;  // [n_layer]
  int32_t shortconv_l_cache = 0;         // L_cache: convolution kernel length
  // Mixture of experts (qwen3moe, lfm2moe); n_expert == 0 for dense models.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;             // k
  int32_t n_ff_exp = 0;                  // expert_feed_forward_length
  int32_t n_layer_dense_lead = 0;        // leading_dense_block_count: first layers keep a dense FFN
  ops::RouterGating expert_gating = ops::RouterGating::kSoftmax;
  bool expert_weights_norm = true;
  float expert_weights_scale = 1.0f;
  // Embeddings (runtime/embed): the file's pooling (llama.cpp's pooling_type: 0 none, 1 mean,
  // 2 cls, 3 last; -1 when the file names none) and whether pooled vectors are L2-normalised.
  int32_t pooling_type = -1;
  bool embedding_normalize = true;
};

// Reads `<arch>.*` keys; errors name the missing or invalid key. n_vocab comes from the token
// embedding's shape (the tokenizer may be absent), so it is filled in by the loader.
Result<HParams> read_hparams(const format::GgufFile& file, Arch arch);

}  // namespace cera::model
