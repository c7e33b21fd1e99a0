// The Model interface the runtime drives: one forward() per batch over preallocated buffers,
// logits out. Architectures implement it (one file each) from the shared blocks in blocks/.
#pragma once

#include <functional>
#include <array>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "model/hparams.h"
#include "model/shard.h"
#include "ops/backend.h"
#include "ops/collective.h"

namespace cera::model {

// Where the sliding-window layers (KvGeometry::sliding) keep the batch's sequences: tables and
// slots into their own storage, laid out like ops::AttentionBatch's and ForwardBatch::kv_slots.
struct RingTables {
  std::span<const int32_t> block_tables;  // all sequences' tables, concatenated
  std::span<const int32_t> table_offset;  // [n_seqs + 1] start of sequence j's table
  std::span<const int32_t> kv_slots;      // [n_tokens] slot that receives each token's K/V
};

// Where forward() must also save a recurrent state inside the batch (prefix caching resumes a
// later sequence from it): the state of token `token`'s sequence right after that token,
// copied into state[il] for every recurrent layer il (F32 [L_cache-1, n_embd], device memory the
// caller owns; empty views for the other layers).
struct StateCheckpoint {
  int32_t token = 0;                  // a row of ForwardBatch::tokens
  std::span<const TensorView> state;  // [n_layer]
};

// What forward() computes for the output rows.
enum class ForwardOutput : uint8_t {
  kLogits,  // [n_vocab, n_out]: the next-token logits
  // [n_embd, n_out]: the final hidden states, what embeddings pool: after the final norm in a
  // decoder (the vector the output head would multiply), the last layer's output in an encoder.
  kHidden,
};

// One batch: tokens of one or more sequences, flattened. Host memory, owned by the caller.
struct ForwardBatch {
  std::span<const int32_t> tokens;       // [n_tokens]; only its size counts when token_ids is set
  // [n_tokens] I32 on the backend's device: when set, the embedding reads the ids there
  // (Backend::embed_ids, e.g. the id top_k just wrote) and the host never waits for them; the
  // caller guarantees they are inside the vocabulary. nullptr: the ids are `tokens`.
  const TensorView* token_ids = nullptr;
  ops::AttentionBatch attention;         // positions, sequence of each token, full-length layers' block tables
  std::span<const int32_t> kv_slots;     // [n_tokens] full-length layers' cache slot for each token's K/V
  // The sliding-window layers' tables (KvCache::ring_table, ring_slot); required when the
  // model has such layers, empty otherwise.
  RingTables ring;
  std::span<const int32_t> output_rows;  // indices into tokens whose outputs are wanted, ascending
  ForwardOutput output = ForwardOutput::kLogits;
  // Recurrent state of the layers that keep one (KvGeometry::kinds), per sequence of the batch:
  // recurrent_state[j * n_layer + il] is sequence j's view for layer il (an empty view for a
  // layer without state). forward() reads it and leaves it describing the state after the
  // batch; the tokens of each sequence must then be contiguous and in order. Empty for models
  // without recurrent layers.
  std::span<const TensorView> recurrent_state;
  // Ascending by token; only models with recurrent layers read it (the others have no state to
  // save). Splits those layers' per-sequence runs at each checkpoint: results are unchanged.
  std::span<const StateCheckpoint> state_checkpoints;
};

// What a layer keeps per sequence between forward() calls.
enum class LayerKind : uint8_t {
  kAttention,  // K/V rows per token in the paged cache
  kShortConv,  // a fixed-size recurrent state: the last L_cache-1 convolution inputs (lfm2)
};

// Per-layer geometry of the KV cache (and recurrent state) the runtime must allocate.
struct KvGeometry {
  int32_t n_layer = 0;
  int32_t kv_width = 0;  // n_head_kv * head_dim: one K (or V) row per token
  std::vector<LayerKind> kinds;          // [n_layer]; empty means every layer is kAttention
  std::array<int64_t, 2> state_ne = {};  // per kShortConv layer and sequence: F32 [L_cache-1, n_embd]
  // Sliding-window attention layers: a query at position p sees only entries (p - sliding_window,
  // p], so the cache may keep a ring of recent entries for them (ForwardBatch::ring).
  int32_t sliding_window = 0;
  std::vector<bool> sliding;  // [n_layer]; empty means no sliding-window layer

  bool has_state() const {
    for (LayerKind k : kinds) {
      if (k != LayerKind::kAttention) return true;
    }
    return false;
  }
  LayerKind kind(int32_t il) const { return kinds.empty() ? LayerKind::kAttention : kinds[il]; }
  bool is_sliding(int32_t il) const { return !sliding.empty() && sliding[il]; }
  bool has_sliding() const {
    for (bool s : sliding) {
      if (s) return true;
    }
    return false;
  }
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const HParams& hparams() const = 0;
  virtual KvGeometry kv_geometry() const = 0;
  // RoPE of layer il's attention, for re-rotating cached K on a context shift.
  virtual ops::RopeParams rope_params(int32_t il) const = 0;
  virtual ops::Backend& backend() = 0;

  // Runs the batch: stores its K/V into `kv` (one KvLayer per layer) and writes the logits of
  // `output_rows`, in order, to `logits` ([n_vocab, output_rows.size()] floats, host memory).
  // An empty `logits` leaves them on the backend's device instead (device_logits()), for
  // sampling there without reading back the vocabulary. With batch.output == kHidden it writes
  // the rows' hidden states instead ([n_embd, output_rows.size()]; `logits` must not be empty).
  virtual Status forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> logits) = 0;
  // false: an encoder (bert): each token attends to every token of its sequence, so a sequence
  // must be whole inside one forward(), and only ForwardOutput::kHidden is computed.
  virtual bool causal() const { return true; }
  // The output rows' logits of the last forward(), on the backend's device, valid until the next
  // forward(); `softcap` is still to be applied (final = softcap * tanh(x / softcap) when > 0),
  // which Backend::top_k does, and read_logits().
  struct DeviceLogits {
    TensorView view;  // [n_vocab, n_out] F32
    float softcap = 0.0f;
  };
  virtual DeviceLogits device_logits() const = 0;
  // Tensor parallel (model/tensor_parallel.h): the rank models whose K/V and recurrent state the
  // runtime allocates, each through its own backend() and kv_geometry(); forward() then takes
  // every rank's views, rank-major. Empty for a model on one device (the runtime allocates for
  // the model itself).
  virtual std::span<Model* const> ranks() const { return {}; }
};

// final = cap * tanh(x / cap) over the logits, when cap > 0 (gemma-style final softcapping).
void apply_logit_softcap(std::span<float> logits, float cap);

// Bytes of weights loaded so far and in all, reported as tensors reach the backend.
using LoadProgress = std::function<void(uint64_t done, uint64_t total)>;

struct LoadOptions {
  int32_t max_batch_tokens = 512;  // largest n_tokens per forward(); scratch is sized for it
  LoadProgress progress;           // optional; called from the loading thread
  // Tensor parallel: load rank shard.rank's slice of the weights (model/shard.h) and compute
  // with its heads and FFN columns (hparams() and kv_geometry() are the rank's). `collective`
  // joins forward() to the other ranks' models, which get the same batches; required when split.
  // Rank 0's logits are the whole model's; every rank's residual stream is.
  ShardSpec shard;
  ops::Collective* collective = nullptr;
};

// Picks the architecture from general.architecture and loads it. The GgufFile must outlive the
// model (CPU weights are used in place from its map).
Result<std::unique_ptr<Model>> load_model(const format::GgufFile& file, ops::Backend& backend,
                                          const LoadOptions& options = {});

}  // namespace cera::model
