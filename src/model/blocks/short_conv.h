// lfm2's gated short-convolution mixer: in_proj (n_embd -> B, C, x), the causal depthwise
// convolution of B*x over the sequence with a carried state of the last L_cache-1 inputs, times
// C, then out_proj. The state belongs to the sequence (runtime/kv_cache), not to the layer.
#pragma once

#include <memory>
#include <span>

#include "model/model.h"
#include "model/weights.h"

namespace cera::model {

// n_ch: the channels this model instance convolves, n_embd / n_ranks (the depthwise
// convolution keeps channels apart, so tensor parallelism splits them: in_proj's B, C and x rows,
// the kernel and the state by channel, out_proj's inputs, summed across ranks after it).
struct ShortConvWeights {
  TensorView in_proj;   // [n_embd, 3 * n_ch]: rows B, C, x
  TensorView conv;      // [L_cache, n_ch] F32: per channel, taps oldest input first
  TensorView out_proj;  // [n_ch, n_embd]
};

Result<ShortConvWeights> load_short_conv(WeightLoader& loader, int layer, int64_t n_embd, int64_t l_cache,
                                         const ShardSpec& shard = {});

// Activations of the mixer, sized for the largest batch.
class ShortConvScratch {
 public:
  static Result<ShortConvScratch> create(ops::Backend& backend, int64_t n_ch, int64_t max_tokens);
  TensorView bcx(int64_t n) const;  // [3 * n_ch, n]
  TensorView y(int64_t n) const;    // [n_ch, n]: convolution output before out_proj

 private:
  int64_t n_ch_ = 0, max_tokens_ = 0;
  Device device_ = Device::kCpu;
  std::shared_ptr<ops::Buffer> bcx_, y_;
};

// One contiguous run of a batch's tokens that belong to one sequence.
struct SequenceRun {
  int32_t seq = 0;    // index into the batch's sequences (token_seq value)
  int64_t first = 0;  // first token row
  int64_t count = 0;
};
// The batch's tokens grouped into per-sequence runs; an error when a sequence's tokens are not
// contiguous (the convolution must see each sequence's tokens in order).
Result<std::vector<SequenceRun>> sequence_runs(const ForwardBatch& batch);

// out[n_embd, n_tokens] = mixer(in); out may alias in. `states` holds each sequence's state of
// this layer ([L_cache-1, n_ch] F32), indexed by SequenceRun::seq; each run is one short_conv
// call (all of a sequence's prompt tokens in one call), split after each checkpoint's token
// (ascending; ForwardBatch::state_checkpoints) so that the state there can be copied to the
// checkpoint's view of layer `il`. The split changes no result: the carried state is exactly
// what the uninterrupted call would hold at that token.
void short_conv_forward(ops::Backend& backend, const ShortConvScratch& scratch, const ShortConvWeights& w,
                        std::span<const SequenceRun> runs, std::span<const TensorView> states,
                        std::span<const StateCheckpoint> checkpoints, size_t il, const TensorView& in,
                        const TensorView& out);
// The checkpoints are in range and ascending, each names a state view per layer.
Status check_state_checkpoints(const ForwardBatch& batch, size_t n_layer);

}  // namespace cera::model
