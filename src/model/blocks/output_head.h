// The output head shared by the decoders: final RMSNorm and the vocabulary projection (tied to
// the token embedding when the file has no output.weight), applied to the requested rows only.
#pragma once

#include <span>

#include "model/blocks/scratch.h"
#include "model/model.h"
#include "model/weights.h"

namespace cera::model {

struct OutputHead {
  TensorView norm;    // [n_embd]
  TensorView output;  // [n_embd, n_vocab], the token embedding when tied
};

// `norm_name`: the final norm's tensor name (lfm2 files call it token_embd_norm.weight). With a
// split `shard`, output.weight is split by vocabulary like token_embd (which a tied head reuses:
// pass the rank's slice).
Result<OutputHead> load_output_head(WeightLoader& loader, ops::Backend& backend, const TensorView& token_embd,
                                    int64_t n_embd, int64_t n_vocab, const std::string& norm_name,
                                    const ShardSpec& shard = {});

// forward()'s check of its output buffer: n_vocab (kLogits, or empty) or n_embd (kHidden, not
// empty) floats per output row.
Status check_output_buffer(const ForwardBatch& batch, std::span<const float> out, int64_t n_vocab, int64_t n_embd);

struct OutputHeadParams {
  float rms_eps = 1e-6f;
  float logit_scale = 1.0f;    // logits are divided by it (granite)
  float final_softcap = 0.0f;  // applied on the host after a download (see Model::DeviceLogits)
  ForwardOutput output = ForwardOutput::kLogits;  // kHidden: stop after the final norm
  // Tensor parallel: the head holds a vocabulary slice; the ranks' logits are gathered (every
  // rank then holds the whole [n_vocab, n_out]).
  ops::Collective* collective = nullptr;
};

// Logits of batch.output_rows of x[n_embd, n_tokens] into scratch; downloaded into `logits` when
// it is not empty (softcap applied there). Returns the device view (Model::device_logits()).
// With params.output == kHidden: the normed rows [n_embd, n_out] instead, downloaded into
// `logits` (which must then have n_embd * n_out floats).
TensorView output_head_forward(ops::Backend& backend, const Scratch& scratch, const OutputHead& head,
                               const OutputHeadParams& params, const TensorView& x,
                               std::span<const int32_t> output_rows, std::span<float> logits);

}  // namespace cera::model
