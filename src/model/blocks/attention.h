// Self-attention block over the paged KV cache: QKV projections (optional biases), optional
// per-head Q/K RMSNorm, RoPE, cache store, attention, output projection. The block does not know
// whether its cache is full-length or a sliding-window ring: LayerCache carries the tables.
#pragma once

#include <optional>

#include "model/blocks/scratch.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/weights.h"

namespace cera::model {

struct AttentionWeights {
  TensorView wq;  // [n_embd, n_head * head_dim]
  TensorView wk;  // [n_embd, n_head_kv * head_dim]
  TensorView wv;  // [n_embd, n_head_kv * head_dim]
  TensorView wo;  // [n_head * head_dim, n_embd]
  std::optional<TensorView> bq, bk, bv, bo;  // [n_head * head_dim] / [n_head_kv * head_dim] / [n_embd]
  std::optional<TensorView> q_norm, k_norm;  // [head_dim], shared by all heads
};

struct AttentionSpec {
  ops::AttentionParams params;
  ops::RopeParams rope;
  float norm_eps = 1e-6f;     // of the Q/K norms
  bool qk_norm = false;       // Q/K RMSNorm tensors are required (qwen3, gemma3, lfm2)
  bool rotary = true;         // false: no RoPE (bert's positions are learned embeddings)
};

// What one attention layer reads and writes in a batch: its cache storage, the batch's tables
// into that storage, and the slots that receive the batch's K/V.
struct LayerCache {
  const ops::KvLayer* kv = nullptr;
  ops::AttentionBatch tables;
  std::span<const int32_t> kv_slots;  // [n_tokens]
};

// Full-length layers use batch.attention and batch.kv_slots; a sliding-window layer whose cache
// is a ring (KvGeometry::sliding) uses batch.ring, with the same positions and token_seq.
LayerCache layer_cache(const ForwardBatch& batch, const ops::KvLayer& kv, bool ring);
// Whether batch.ring fits the batch (one slot per token, one table per sequence).
bool has_ring_tables(const ForwardBatch& batch);

// Layer il's attention as the hyperparameters describe it: grouped-query heads, head_dim, the
// scale (attention.scale, else 1/sqrt(head_dim)), RoPE; a local layer (hp.swa_layers[il]) gets
// the sliding window and the local RoPE base, unscaled. qk_norm is left to the architecture.
AttentionSpec attention_spec(const HParams& hp, int il);

// `spec` is the whole model's layer (all heads); with a split `shard` the rank's slice is loaded:
// its query heads' Q rows and O columns, its KV heads' K/V rows (kv_head_shard), their biases,
// and the O bias on rank 0 only (the ranks' O outputs are summed, so it must be added once).
Result<AttentionWeights> load_attention(WeightLoader& loader, int layer, int64_t n_embd, const AttentionSpec& spec,
                                        const ShardSpec& shard = {});

// The spec a rank computes layer il with: the whole model's, with the rank's head counts
// (shard_hparams' n_head and n_head_kv).
AttentionSpec rank_attention_spec(AttentionSpec whole, const HParams& rank);

// out[n_embd, n_tokens] = attention(in[n_embd, n_tokens]); out may alias in (in is consumed
// by the projections before out is written).
void attention_forward(ops::Backend& backend, const Scratch& scratch, const AttentionWeights& w,
                       const AttentionSpec& spec, const LayerCache& cache, const TensorView& in,
                       const TensorView& out);

}  // namespace cera::model
