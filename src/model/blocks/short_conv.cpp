// The gated short-convolution mixer over a batch: one in_proj and one out_proj matmul for all
// tokens, one short_conv call per sequence run in between.
#include "model/blocks/short_conv.h"

namespace cera::model {

Result<ShortConvWeights> load_short_conv(WeightLoader& loader, int layer, int64_t n_embd, int64_t l_cache,
                                         const ShardSpec& shard) {
  const ShardUnit channel{.what = "channel"};
  ShortConvWeights w;
  CERA_ASSIGN_OR_RETURN(w.in_proj, loader.require_shard(layer_tensor(layer, "shortconv.in_proj"), {n_embd, 3 * n_embd, 1, 1},
                                                        WeightUse::kMatmul, ShardSplit::kOutputs,
                                                        {.what = "channel", .groups = 3}, shard));
  CERA_ASSIGN_OR_RETURN(w.conv, loader.require_shard(layer_tensor(layer, "shortconv.conv"), {l_cache, n_embd, 1, 1},
                                                     WeightUse::kVector, ShardSplit::kOutputs, channel, shard));
  CERA_ASSIGN_OR_RETURN(w.out_proj, loader.require_shard(layer_tensor(layer, "shortconv.out_proj"), {n_embd, n_embd, 1, 1},
                                                         WeightUse::kMatmul, ShardSplit::kInputs, channel, shard));
  return w;
}

Result<ShortConvScratch> ShortConvScratch::create(ops::Backend& backend, int64_t n_ch, int64_t max_tokens) {
  ShortConvScratch s;
  s.n_ch_ = n_ch;
  s.max_tokens_ = max_tokens;
  s.device_ = backend.device();
  CERA_ASSIGN_OR_RETURN(auto bcx, backend.allocate(static_cast<uint64_t>(3 * n_ch * max_tokens) * sizeof(float)));
  CERA_ASSIGN_OR_RETURN(auto y, backend.allocate(static_cast<uint64_t>(n_ch * max_tokens) * sizeof(float)));
  s.bcx_ = std::move(bcx);
  s.y_ = std::move(y);
  return s;
}

TensorView ShortConvScratch::bcx(int64_t n) const {
  CERA_CHECK(n >= 1 && n <= max_tokens_);
  return bcx_->view(DType::kF32, {3 * n_ch_, n, 1, 1}, device_);
}
TensorView ShortConvScratch::y(int64_t n) const {
  CERA_CHECK(n >= 1 && n <= max_tokens_);
  return y_->view(DType::kF32, {n_ch_, n, 1, 1}, device_);
}

Result<std::vector<SequenceRun>> sequence_runs(const ForwardBatch& batch) {
  const auto& seq = batch.attention.token_seq;
  if (seq.size() != batch.tokens.size()) return invalid_argument("batch: token_seq must name the sequence of every token");
  std::vector<SequenceRun> runs;
  for (size_t t = 0; t < seq.size(); ++t) {
    if (!runs.empty() && runs.back().seq == seq[t]) {
      ++runs.back().count;
      continue;
    }
    for (const SequenceRun& r : runs) {
      if (r.seq == seq[t]) {
        return invalid_argument("batch: the tokens of sequence " + std::to_string(seq[t]) +
                                " are not contiguous (a recurrent layer needs them in one run)");
      }
    }
    runs.push_back({seq[t], static_cast<int64_t>(t), 1});
  }
  return runs;
}

Status check_state_checkpoints(const ForwardBatch& batch, size_t n_layer) {
  int64_t last = -1;
  for (const StateCheckpoint& c : batch.state_checkpoints) {
    if (c.token <= last || static_cast<size_t>(c.token) >= batch.tokens.size() || c.state.size() != n_layer) {
      return invalid_argument("batch: state checkpoint at token " + std::to_string(c.token) +
                              " out of order, out of range, or without a view per layer");
    }
    last = c.token;
  }
  return {};
}

void short_conv_forward(ops::Backend& backend, const ShortConvScratch& scratch, const ShortConvWeights& w,
                        std::span<const SequenceRun> runs, std::span<const TensorView> states,
                        std::span<const StateCheckpoint> checkpoints, size_t il, const TensorView& in,
                        const TensorView& out) {
  const int64_t n = in.rows();
  const TensorView bcx = scratch.bcx(n), y = scratch.y(n);
  backend.matmul(bcx, w.in_proj, in);
  size_t next = 0;  // checkpoints and runs are both in token order
  for (const SequenceRun& r : runs) {
    const TensorView& state = states[static_cast<size_t>(r.seq)];
    int64_t pos = r.first;
    const int64_t end = r.first + r.count;
    while (pos < end) {
      while (next < checkpoints.size() && checkpoints[next].token < pos) ++next;
      const bool split = next < checkpoints.size() && checkpoints[next].token < end;
      const int64_t stop = split ? checkpoints[next].token + 1 : end;
      backend.short_conv(y.slice_rows(pos, stop - pos), bcx.slice_rows(pos, stop - pos), w.conv, state);
      if (split) backend.copy(checkpoints[next++].state[il], state);  // the state right after token stop - 1
      pos = stop;
    }
  }
  backend.matmul(out, w.out_proj, y);
}

}  // namespace cera::model
