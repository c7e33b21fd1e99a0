#include "model/blocks/attention.h"

#include <cmath>

namespace cera::model {

AttentionSpec attention_spec(const HParams& hp, int il) {
  const bool local = !hp.swa_layers.empty() && hp.swa_layers[static_cast<size_t>(il)];
  AttentionSpec a;
  a.params = {.n_head = hp.n_head,
              .n_head_kv = hp.n_head_kv,
              .head_dim = hp.head_dim,
              .scale = hp.attention_scale != 0.0f ? hp.attention_scale : 1.0f / std::sqrt(static_cast<float>(hp.head_dim)),
              .softcap = 0.0f,
              .sliding_window = local ? hp.sliding_window : 0};
  a.rope = {.kind = hp.rope_kind,
            .n_rot = hp.n_rot,
            .freq_base = local ? hp.rope_freq_base_swa : hp.rope_freq_base,
            .freq_scale = local ? 1.0f : hp.rope_freq_scale,
            .freq_factors = nullptr};
  a.norm_eps = hp.rms_eps;
  return a;
}

Result<AttentionWeights> load_attention(WeightLoader& loader, int layer, int64_t n_embd, const AttentionSpec& spec,
                                        const ShardSpec& shard) {
  const int64_t hd = spec.params.head_dim;
  const int64_t q_width = spec.params.n_head * hd, kv_width = spec.params.n_head_kv * hd;
  const ShardSpec kv = kv_head_shard(shard, spec.params.n_head_kv);
  const HeadSplit split = head_split(spec.params.n_head, spec.params.n_head_kv, hd, shard);
  const ShardUnit &head = split.q, &kv_head = split.kv;
  // A bias is optional; when present it is split like its Linear's outputs.
  auto bias = [&](const char* role, int64_t width, const ShardUnit& unit,
                  const ShardSpec& split) -> Result<std::optional<TensorView>> {
    const std::string name = layer_tensor(layer, role, "bias");
    if (!loader.has(name)) return std::optional<TensorView>();
    CERA_ASSIGN_OR_RETURN(TensorView b, loader.require_shard(name, {width, 1, 1, 1}, WeightUse::kVector,
                                                             ShardSplit::kVector, unit, split));
    return std::optional<TensorView>(b);
  };
  AttentionWeights w;
  CERA_ASSIGN_OR_RETURN(w.wq, loader.require_shard(layer_tensor(layer, "attn_q"), {n_embd, q_width, 1, 1},
                                                   WeightUse::kMatmul, ShardSplit::kOutputs, head, shard));
  CERA_ASSIGN_OR_RETURN(w.wk, loader.require_shard(layer_tensor(layer, "attn_k"), {n_embd, kv_width, 1, 1},
                                                   WeightUse::kMatmul, ShardSplit::kOutputs, kv_head, kv));
  CERA_ASSIGN_OR_RETURN(w.wv, loader.require_shard(layer_tensor(layer, "attn_v"), {n_embd, kv_width, 1, 1},
                                                   WeightUse::kMatmul, ShardSplit::kOutputs, kv_head, kv));
  CERA_ASSIGN_OR_RETURN(w.wo, loader.require_shard(layer_tensor(layer, "attn_output"), {q_width, n_embd, 1, 1},
                                                   WeightUse::kMatmul, ShardSplit::kInputs, head, shard));
  CERA_ASSIGN_OR_RETURN(w.bq, bias("attn_q", q_width, head, shard));
  CERA_ASSIGN_OR_RETURN(w.bk, bias("attn_k", kv_width, kv_head, kv));
  CERA_ASSIGN_OR_RETURN(w.bv, bias("attn_v", kv_width, kv_head, kv));
  CERA_ASSIGN_OR_RETURN(w.bo, loader.optional(layer_tensor(layer, "attn_output", "bias"), {n_embd, 1, 1, 1}, WeightUse::kVector));
  if (shard.rank != 0) w.bo.reset();
  if (spec.qk_norm) {
    CERA_ASSIGN_OR_RETURN(w.q_norm, loader.require(layer_tensor(layer, "attn_q_norm"), {hd, 1, 1, 1}, WeightUse::kVector));
    CERA_ASSIGN_OR_RETURN(w.k_norm, loader.require(layer_tensor(layer, "attn_k_norm"), {hd, 1, 1, 1}, WeightUse::kVector));
  }
  return w;
}

AttentionSpec rank_attention_spec(AttentionSpec whole, const HParams& rank) {
  whole.params.n_head = rank.n_head;
  whole.params.n_head_kv = rank.n_head_kv;
  return whole;
}

LayerCache layer_cache(const ForwardBatch& batch, const ops::KvLayer& kv, bool ring) {
  if (!ring) return {.kv = &kv, .tables = batch.attention, .kv_slots = batch.kv_slots};
  return {.kv = &kv,
          .tables = {.positions = batch.attention.positions,
                     .token_seq = batch.attention.token_seq,
                     .block_tables = batch.ring.block_tables,
                     .table_offset = batch.ring.table_offset},
          .kv_slots = batch.ring.kv_slots};
}

bool has_ring_tables(const ForwardBatch& batch) {
  return batch.ring.kv_slots.size() == batch.tokens.size() &&
         batch.ring.table_offset.size() == batch.attention.table_offset.size();
}

namespace {
const TensorView* opt(const std::optional<TensorView>& v) { return v ? &*v : nullptr; }
}  // namespace

void attention_forward(ops::Backend& backend, const Scratch& scratch, const AttentionWeights& w,
                       const AttentionSpec& spec, const LayerCache& cache, const TensorView& in,
                       const TensorView& out) {
  const int64_t n = in.rows(), hd = spec.params.head_dim;
  const int64_t n_head = spec.params.n_head, n_head_kv = spec.params.n_head_kv;
  const TensorView q = scratch.q(n), k = scratch.k(n), v = scratch.v(n), attn = scratch.attn(n);
  backend.matmul(q, w.wq, in, opt(w.bq));
  backend.matmul(k, w.wk, in, opt(w.bk));
  backend.matmul(v, w.wv, in, opt(w.bv));
  // Per-head views: [head_dim, n_heads, n_tokens].
  const TensorView qh = q.reshaped({hd, n_head, n, 1});
  const TensorView kh = k.reshaped({hd, n_head_kv, n, 1});
  if (w.q_norm) {
    backend.rms_norm(qh, qh, *w.q_norm, spec.norm_eps);
    backend.rms_norm(kh, kh, *w.k_norm, spec.norm_eps);
  }
  if (spec.rotary) {
    backend.rope(qh, cache.tables.positions, spec.rope);
    backend.rope(kh, cache.tables.positions, spec.rope);
  }
  backend.kv_store(*cache.kv, k, v, cache.kv_slots);
  backend.attention(attn, qh, *cache.kv, cache.tables, spec.params);
  backend.matmul(out, w.wo, attn, opt(w.bo));
}

}  // namespace cera::model
