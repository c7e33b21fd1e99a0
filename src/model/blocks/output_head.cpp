#include "model/blocks/output_head.h"

#include <string>

#include "ops/collective.h"

namespace cera::model {

Result<OutputHead> load_output_head(WeightLoader& loader, ops::Backend& backend, const TensorView& token_embd,
                                    int64_t n_embd, int64_t n_vocab, const std::string& norm_name,
                                    const ShardSpec& shard) {
  OutputHead h;
  CERA_ASSIGN_OR_RETURN(h.norm, loader.require(norm_name, {n_embd, 1, 1, 1}, WeightUse::kVector));
  if (loader.has("output.weight")) {
    CERA_ASSIGN_OR_RETURN(h.output, loader.require_shard("output.weight", {n_embd, n_vocab, 1, 1}, WeightUse::kMatmul,
                                                         ShardSplit::kOutputs, {.what = "vocabulary row"}, shard));
  } else if (backend.supports_weight(token_embd.dtype)) {
    h.output = token_embd;  // tied embeddings
  } else {
    return unsupported("tied output uses token_embd.weight of type " + std::string(dtype_name(token_embd.dtype)) +
                       ", which has no matmul kernel on " + backend.name());
  }
  return h;
}

Status check_output_buffer(const ForwardBatch& batch, std::span<const float> out, int64_t n_vocab, int64_t n_embd) {
  const auto n_out = static_cast<int64_t>(batch.output_rows.size());
  if (batch.output == ForwardOutput::kHidden) {
    if (out.size() != static_cast<size_t>(n_out * n_embd)) {
      return invalid_argument("hidden-state buffer holds " + std::to_string(out.size()) + " floats, expected " +
                              std::to_string(n_out * n_embd) + " (n_embd " + std::to_string(n_embd) + " x " +
                              std::to_string(n_out) + " output rows)");
    }
    return {};
  }
  if (!out.empty() && out.size() != static_cast<size_t>(n_out * n_vocab)) {
    return invalid_argument("logits buffer has the wrong size");
  }
  return {};
}

TensorView output_head_forward(ops::Backend& backend, const Scratch& scratch, const OutputHead& head,
                               const OutputHeadParams& params, const TensorView& x,
                               std::span<const int32_t> output_rows, std::span<float> logits) {
  const auto n_out = static_cast<int64_t>(output_rows.size());
  // Only the requested rows go through the head (the vocabulary matmul is the largest).
  const TensorView rows = scratch.h(n_out);
  backend.embed(rows, x, output_rows, 1.0f);
  backend.rms_norm(rows, rows, head.norm, params.rms_eps);
  if (params.output == ForwardOutput::kHidden) {
    backend.download(logits.data(), rows);
    return rows;
  }
  const TensorView out = scratch.logits(n_out);
  if (params.collective != nullptr) {
    const TensorView part = scratch.logits_part(n_out);
    backend.matmul(part, head.output, rows);
    params.collective->all_gather_cols(part, out);
  } else {
    backend.matmul(out, head.output, rows);
  }
  if (params.logit_scale != 1.0f) backend.scale(out, 1.0f / params.logit_scale);
  if (!logits.empty()) {
    backend.download(logits.data(), out);
    // On the host: one pass over n_vocab floats per output row, after the download we need anyway.
    apply_logit_softcap(logits, params.final_softcap);
  }
  return out;
}

}  // namespace cera::model
