// The Model interface the runtime drives: one forward() per batch over preallocated buffers,
// logits out. Architectures implement it (one file each) from the shared blocks in blocks/.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "model/hparams.h"
#include "ops/backend.h"

namespace cera::model {

// One batch: tokens of one or more sequences, flattened. Host memory, owned by the caller.
struct ForwardBatch {
  std::span<const int32_t> tokens;       // [n_tokens]
  ops::AttentionBatch attention;         // positions, sequence of each token, block tables
  std::span<const int32_t> kv_slots;     // [n_tokens] cache slot that receives each token's K/V
  std::span<const int32_t> output_rows;  // indices into tokens whose logits are wanted, ascending
};

// Per-layer geometry of the KV cache the runtime must allocate.
struct KvGeometry {
  int32_t n_layer = 0;
  int32_t kv_width = 0;  // n_head_kv * head_dim: one K (or V) row per token
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
  virtual Status forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> logits) = 0;
};

struct LoadOptions {
  int32_t max_batch_tokens = 512;  // largest n_tokens per forward(); scratch is sized for it
};

// Picks the architecture from general.architecture and loads it. The GgufFile must outlive the
// model (CPU weights are used in place from its map).
Result<std::unique_ptr<Model>> load_model(const format::GgufFile& file, ops::Backend& backend,
                                          const LoadOptions& options = {});

}  // namespace cera::model
