// Key reading with the defaults of FORMATS.md §6.1; scalar-or-array keys (head counts, n_ff)
// must be uniform here since the dense families do not vary them per layer. The hybrid families
// (lfm2, lfm2moe) read head_count_kv as a per-layer array (0 = convolution layer).
#include "model/hparams.h"

#include <cmath>

namespace cera::model {
namespace {

// A key that may be a scalar or a per-layer array; dense models need every layer equal.
Result<int32_t> uniform_int(const format::GgufFile& f, const std::string& key, int32_t n_layer) {
  const format::GgufValue* v = f.find(key);
  if (v == nullptr) return not_found("metadata key '" + key + "' is missing");
  if (const format::GgufArray* a = v->array()) {
    if (a->size() != static_cast<uint64_t>(n_layer) || a->size() == 0) {
      return invalid_argument("key '" + key + "': per-layer array of " + std::to_string(a->size()) +
                              " values, expected " + std::to_string(n_layer));
    }
    auto first = a->at(0).as_int();
    for (uint64_t i = 0; i < a->size(); ++i) {
      if (a->at(i).as_int() != first || !first) {
        return unsupported("key '" + key + "': values differ between layers, which this architecture does not support");
      }
    }
    return static_cast<int32_t>(*first);
  }
  return f.get<int32_t>(key);
}

// How embeddings of this file are pooled: llama.cpp's `<arch>.pooling_type` (0 none, 1 mean,
// 2 cls, 3 last; others are refused) and cera's `cera.embedding.normalize` (false when the
// checkpoint has no Normalize module; absent: normalise).
Status read_embedding_keys(const format::GgufFile& f, const std::string& p, HParams& hp) {
  if (f.has(p + "pooling_type")) {
    CERA_ASSIGN_OR_RETURN(const int32_t type, f.get<int32_t>(p + "pooling_type"));
    if (type < 0 || type > 3) {
      return unsupported("key '" + p + "pooling_type' is " + std::to_string(type) +
                         " (supported: 0 none, 1 mean, 2 cls, 3 last)");
    }
    hp.pooling_type = type;
  }
  CERA_ASSIGN_OR_RETURN(hp.embedding_normalize, f.get_or<bool>("cera.embedding.normalize", true));
  return {};
}

Status positive(const std::string& key, int64_t value) {
  if (value <= 0) return invalid_argument("key '" + key + "' is " + std::to_string(value) + ", expected > 0");
  return {};
}

// Gemma 3: sqrt(n_embd) embedding scale (in code, not metadata), its query scale, and the
// local/global layer pattern: `sliding_window_pattern` is a period (layers with il % period <
// period - 1 are local) or a per-layer bool array; the default period is 6.
Status read_gemma3_extras(const format::GgufFile& f, const std::string& p, HParams& hp) {
  hp.embedding_scale = std::sqrt(static_cast<float>(hp.n_embd));
  if (hp.attention_scale == 0.0f) {
    // The 27B (62 layers) scales queries by 1/sqrt(n_embd / n_head), the others by 1/sqrt(head_dim).
    hp.attention_scale = hp.n_layer == 62 ? 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head))
                                          : 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  }
  CERA_ASSIGN_OR_RETURN(hp.sliding_window, f.get_or<int32_t>(p + "attention.sliding_window", 0));
  CERA_ASSIGN_OR_RETURN(hp.rope_freq_base_swa, f.get_or<float>(p + "rope.freq_base_swa", 10000.0f));
  CERA_ASSIGN_OR_RETURN(hp.final_logit_softcap, f.get_or<float>(p + "final_logit_softcapping", 0.0f));
  hp.swa_layers.assign(hp.n_layer, false);
  if (hp.sliding_window <= 0) return {};
  const format::GgufValue* pattern = f.find(p + "attention.sliding_window_pattern");
  if (pattern != nullptr && pattern->array() != nullptr) {
    CERA_ASSIGN_OR_RETURN(const std::vector<bool> flags, f.get_array<bool>(p + "attention.sliding_window_pattern"));
    if (flags.size() != static_cast<size_t>(hp.n_layer)) {
      return invalid_argument("key '" + p + "attention.sliding_window_pattern' has " + std::to_string(flags.size()) +
                              " entries, expected " + std::to_string(hp.n_layer));
    }
    hp.swa_layers = flags;
    return {};
  }
  CERA_ASSIGN_OR_RETURN(const int32_t period, f.get_or<int32_t>(p + "attention.sliding_window_pattern", 6));
  if (period <= 0) return invalid_argument("key '" + p + "attention.sliding_window_pattern' must be > 0");
  for (int32_t il = 0; il < hp.n_layer; ++il) hp.swa_layers[il] = il % period < period - 1;
  return {};
}

// lfm2 / lfm2moe: attention.head_count_kv is a per-layer array whose 0 entries mark the
// short-convolution layers; every attention layer must have the same count (n_head_kv).
Status read_hybrid_layers(const format::GgufFile& f, const std::string& p, HParams& hp) {
  const std::string key = p + "attention.head_count_kv";
  const format::GgufValue* v = f.find(key);
  if (v == nullptr) return not_found("metadata key '" + key + "' is missing (a per-layer array, 0 = convolution layer)");
  if (v->array() != nullptr) {
    CERA_ASSIGN_OR_RETURN(hp.n_head_kv_layer, f.get_array<int32_t>(key));
  } else {
    CERA_ASSIGN_OR_RETURN(const int32_t n, f.get<int32_t>(key));
    hp.n_head_kv_layer.assign(hp.n_layer, n);
  }
  if (hp.n_head_kv_layer.size() != static_cast<size_t>(hp.n_layer)) {
    return invalid_argument("key '" + key + "' has " + std::to_string(hp.n_head_kv_layer.size()) + " entries, expected " +
                            std::to_string(hp.n_layer));
  }
  hp.n_head_kv = 0;
  for (const int32_t n : hp.n_head_kv_layer) {
    if (n < 0 || (n != 0 && hp.n_head_kv != 0 && n != hp.n_head_kv)) {
      return unsupported("key '" + key + "': attention layers with different KV head counts");
    }
    if (n != 0) hp.n_head_kv = n;
  }
  CERA_ASSIGN_OR_RETURN(hp.shortconv_l_cache, f.get<int32_t>(p + "shortconv.l_cache"));
  if (hp.shortconv_l_cache < 1 || hp.shortconv_l_cache > 16) {
    return invalid_argument("key '" + p + "shortconv.l_cache' is " + std::to_string(hp.shortconv_l_cache) +
                            ", expected 1..16");
  }
  return {};
}

// qwen3moe / lfm2moe: expert counts and the router. Defaults follow llama.cpp's loaders: both
// families renormalise the chosen weights; the gating function defaults to the family's own.
Status read_moe_keys(const format::GgufFile& f, const std::string& p, HParams& hp) {
  CERA_ASSIGN_OR_RETURN(hp.n_expert, f.get<int32_t>(p + "expert_count"));
  CERA_RETURN_IF_ERROR(positive(p + "expert_count", hp.n_expert));
  CERA_ASSIGN_OR_RETURN(hp.n_expert_used, f.get<int32_t>(p + "expert_used_count"));
  if (hp.n_expert_used <= 0 || hp.n_expert_used > hp.n_expert) {
    return invalid_argument("key '" + p + "expert_used_count' is " + std::to_string(hp.n_expert_used) + ", expected 1.." +
                            std::to_string(hp.n_expert));
  }
  CERA_ASSIGN_OR_RETURN(hp.n_ff_exp, f.get<int32_t>(p + "expert_feed_forward_length"));
  CERA_RETURN_IF_ERROR(positive(p + "expert_feed_forward_length", hp.n_ff_exp));
  CERA_ASSIGN_OR_RETURN(hp.n_layer_dense_lead, f.get_or<int32_t>(p + "leading_dense_block_count", 0));
  if (hp.n_layer_dense_lead < 0 || hp.n_layer_dense_lead > hp.n_layer) {
    return invalid_argument("key '" + p + "leading_dense_block_count' is " + std::to_string(hp.n_layer_dense_lead));
  }
  const int32_t default_gating = hp.arch == Arch::kLfm2Moe ? 2 : 1;
  CERA_ASSIGN_OR_RETURN(const int32_t gating, f.get_or<int32_t>(p + "expert_gating_func", default_gating));
  if (gating != 1 && gating != 2) {
    return unsupported("key '" + p + "expert_gating_func' is " + std::to_string(gating) + " (supported: 1 softmax, 2 sigmoid)");
  }
  hp.expert_gating = gating == 1 ? ops::RouterGating::kSoftmax : ops::RouterGating::kSigmoid;
  CERA_ASSIGN_OR_RETURN(hp.expert_weights_norm, f.get_or<bool>(p + "expert_weights_norm", true));
  CERA_ASSIGN_OR_RETURN(hp.expert_weights_scale, f.get_or<float>(p + "expert_weights_scale", 1.0f));
  if (hp.expert_weights_scale == 0.0f) hp.expert_weights_scale = 1.0f;  // llama.cpp writes 0 for "unset"
  return {};
}

}  // namespace

Result<HParams> read_hparams(const format::GgufFile& f, Arch arch) {
  HParams hp;
  hp.arch = arch;
  const std::string p = std::string(arch_name(arch)) + ".";
  CERA_ASSIGN_OR_RETURN(hp.n_layer, f.get<int32_t>(p + "block_count"));
  CERA_RETURN_IF_ERROR(positive(p + "block_count", hp.n_layer));
  CERA_ASSIGN_OR_RETURN(hp.n_ctx_train, f.get<int32_t>(p + "context_length"));
  CERA_ASSIGN_OR_RETURN(hp.n_embd, f.get<int32_t>(p + "embedding_length"));
  CERA_RETURN_IF_ERROR(positive(p + "embedding_length", hp.n_embd));
  CERA_ASSIGN_OR_RETURN(hp.n_head, uniform_int(f, p + "attention.head_count", hp.n_layer));
  CERA_RETURN_IF_ERROR(positive(p + "attention.head_count", hp.n_head));
  hp.n_head_kv = hp.n_head;
  const bool hybrid = arch == Arch::kLfm2 || arch == Arch::kLfm2Moe;
  if (hybrid) {
    CERA_RETURN_IF_ERROR(read_hybrid_layers(f, p, hp));
  } else if (f.has(p + "attention.head_count_kv")) {
    CERA_ASSIGN_OR_RETURN(hp.n_head_kv, uniform_int(f, p + "attention.head_count_kv", hp.n_layer));
  }
  // A hybrid model made only of convolution layers has no KV heads at all.
  if (!(hybrid && hp.n_head_kv == 0)) CERA_RETURN_IF_ERROR(positive(p + "attention.head_count_kv", hp.n_head_kv));
  if (hp.n_head_kv != 0 && hp.n_head % hp.n_head_kv != 0) {
    return invalid_argument("attention.head_count " + std::to_string(hp.n_head) +
                            " is not a multiple of head_count_kv " + std::to_string(hp.n_head_kv));
  }
  CERA_ASSIGN_OR_RETURN(hp.n_ff, uniform_int(f, p + "feed_forward_length", hp.n_layer));
  CERA_RETURN_IF_ERROR(positive(p + "feed_forward_length", hp.n_ff));
  // bert's norms are LayerNorms: their epsilon takes the RMS epsilon's place.
  CERA_ASSIGN_OR_RETURN(hp.rms_eps, f.get<float>(p + (arch == Arch::kBert ? "attention.layer_norm_epsilon"
                                                                           : "attention.layer_norm_rms_epsilon")));

  const int32_t default_head_dim = hp.n_embd / hp.n_head;
  CERA_ASSIGN_OR_RETURN(hp.head_dim, f.get_or<int32_t>(p + "attention.key_length", default_head_dim));
  CERA_ASSIGN_OR_RETURN(const int32_t value_dim, f.get_or<int32_t>(p + "attention.value_length", hp.head_dim));
  if (value_dim != hp.head_dim) {
    return unsupported("attention.value_length " + std::to_string(value_dim) + " differs from key_length " +
                       std::to_string(hp.head_dim));
  }
  CERA_RETURN_IF_ERROR(positive(p + "attention.key_length", hp.head_dim));
  CERA_ASSIGN_OR_RETURN(hp.n_rot, f.get_or<int32_t>(p + "rope.dimension_count", hp.head_dim));
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
    return invalid_argument("key '" + p + "rope.dimension_count' is " + std::to_string(hp.n_rot) +
                            ", expected an even number in 2.." + std::to_string(hp.head_dim));
  }
  CERA_ASSIGN_OR_RETURN(hp.rope_freq_base, f.get_or<float>(p + "rope.freq_base", 10000.0f));
  CERA_ASSIGN_OR_RETURN(const std::string scaling, f.get_or<std::string>(p + "rope.scaling.type", "none"));
  if (scaling == "linear") {
    CERA_ASSIGN_OR_RETURN(const float factor, f.get<float>(p + "rope.scaling.factor"));
    if (!(factor > 0.0f)) return invalid_argument("key '" + p + "rope.scaling.factor' must be > 0");
    hp.rope_freq_scale = 1.0f / factor;
  } else if (scaling != "none") {
    return unsupported("rope scaling type '" + scaling + "' (supported: none, linear)");
  }
  // RoPE flavour is fixed per architecture (FORMATS.md), never read from metadata.
  hp.rope_kind = (arch == Arch::kLlama || arch == Arch::kGranite) ? ops::RopeKind::kNorm : ops::RopeKind::kNeox;

  if (f.has(p + "attention.scale")) {
    CERA_ASSIGN_OR_RETURN(hp.attention_scale, f.get<float>(p + "attention.scale"));
  }
  if (arch == Arch::kGemma3) {
    CERA_RETURN_IF_ERROR(read_gemma3_extras(f, p, hp));
  }
  if (arch == Arch::kQwen3Moe || arch == Arch::kLfm2Moe) {
    CERA_RETURN_IF_ERROR(read_moe_keys(f, p, hp));
  }
  CERA_RETURN_IF_ERROR(read_embedding_keys(f, p, hp));
  if (arch == Arch::kGranite) {
    CERA_ASSIGN_OR_RETURN(hp.embedding_scale, f.get_or<float>(p + "embedding_scale", 1.0f));
    CERA_ASSIGN_OR_RETURN(hp.residual_scale, f.get_or<float>(p + "residual_scale", 1.0f));
    CERA_ASSIGN_OR_RETURN(hp.logit_scale, f.get<float>(p + "logit_scale"));
    if (!(hp.logit_scale > 0.0f)) return invalid_argument("key '" + p + "logit_scale' must be > 0");
  }
  return hp;
}

}  // namespace cera::model
