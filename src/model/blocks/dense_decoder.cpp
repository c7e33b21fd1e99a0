#include "model/blocks/dense_decoder.h"

#include <algorithm>
#include <vector>

#include "model/blocks/embedding.h"
#include "model/blocks/output_head.h"
#include "ops/collective.h"
#include "model/shard_hparams.h"

namespace cera::model {
namespace {

struct DenseLayer {
  TensorView attn_norm;  // [n_embd]
  AttentionWeights attention;
  std::optional<TensorView> post_attention_norm;  // [n_embd], sandwich norms only
  TensorView ffn_norm;   // [n_embd]
  FfnWeights ffn;
  std::optional<TensorView> post_ffw_norm;        // [n_embd], sandwich norms only
};

class DenseDecoder final : public Model {
 public:
  DenseDecoder(ops::Backend& backend, DenseSpec spec) : backend_(backend), spec_(std::move(spec)) {}

  Status load(const format::GgufFile& file, const LoadOptions& options);

  const HParams& hparams() const override { return spec_.hp; }
  KvGeometry kv_geometry() const override;
  ops::RopeParams rope_params(int32_t il) const override { return spec_.attention[il].rope; }
  ops::Backend& backend() override { return backend_; }
  Status forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> logits) override;
  DeviceLogits device_logits() const override { return {last_logits_, spec_.hp.final_logit_softcap}; }

 private:
  // Tensor parallel: the sum over the ranks of a row-split Linear's partial outputs.
  void reduce(const TensorView& t) const {
    if (collective_ != nullptr) collective_->all_reduce_sum(t);
  }

  ops::Backend& backend_;
  DenseSpec spec_;  // hp and attention: the rank's heads and FFN columns when split
  ops::Collective* collective_ = nullptr;
  VocabShard vocab_;
  TensorView token_embd_;   // [n_embd, n_vocab], or the rank's vocabulary rows
  std::vector<DenseLayer> layers_;
  OutputHead head_;
  std::vector<std::unique_ptr<ops::Buffer>> buffers_;
  std::optional<Scratch> scratch_;
  TensorView last_logits_;  // [n_vocab, n_out] of the last forward, in scratch
};

Status DenseDecoder::load(const format::GgufFile& file, const LoadOptions& options) {
  HParams& hp = spec_.hp;  // the whole model's while loading, the rank's after
  const ShardSpec& shard = options.shard;
  collective_ = shard.split() ? options.collective : nullptr;
  WeightLoader loader(file, backend_, options.progress);
  const auto embd_shape = loader.shape_of("token_embd.weight");
  if (!embd_shape) return not_found("tensor 'token_embd.weight' is missing");
  hp.n_vocab = static_cast<int32_t>((*embd_shape)[1]);
  const int64_t n_embd = hp.n_embd, n_vocab = hp.n_vocab;
  CERA_ASSIGN_OR_RETURN(const HParams rank_hp, shard_hparams(hp, shard));
  CERA_ASSIGN_OR_RETURN(vocab_, vocab_shard(n_vocab, shard));
  CERA_ASSIGN_OR_RETURN(token_embd_, loader.require_shard("token_embd.weight", {n_embd, n_vocab, 1, 1}, WeightUse::kEmbedding,
                                                          ShardSplit::kOutputs, {.what = "vocabulary row"}, shard));

  // Llama 3.1+ carries its rope scaling as per-dimension factors; read on the host by rope().
  if (const format::GgufTensorInfo* rf = file.find_tensor("rope_freqs.weight")) {
    CERA_RETURN_IF_ERROR(loader.require("rope_freqs.weight", {hp.n_rot / 2, 1, 1, 1}, WeightUse::kVector));
    const auto* factors = reinterpret_cast<const float*>(file.tensor_data(*rf).data());
    for (int il = 0; il < hp.n_layer; ++il) {
      if (!hp.swa_layers[il]) spec_.attention[il].rope.freq_factors = factors;
    }
  }
  layers_.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    DenseLayer& l = layers_[il];
    CERA_ASSIGN_OR_RETURN(l.attn_norm, loader.require(layer_tensor(il, "attn_norm"), {n_embd, 1, 1, 1}, WeightUse::kVector));
    CERA_ASSIGN_OR_RETURN(l.attention, load_attention(loader, il, n_embd, spec_.attention[il], shard));
    CERA_ASSIGN_OR_RETURN(l.ffn_norm, loader.require(layer_tensor(il, "ffn_norm"), {n_embd, 1, 1, 1}, WeightUse::kVector));
    CERA_ASSIGN_OR_RETURN(l.ffn, load_ffn(loader, il, n_embd, hp.n_ff, shard));
    if (spec_.sandwich_norms) {
      CERA_ASSIGN_OR_RETURN(l.post_attention_norm, loader.require(layer_tensor(il, "post_attention_norm"),
                                                                  {n_embd, 1, 1, 1}, WeightUse::kVector));
      CERA_ASSIGN_OR_RETURN(l.post_ffw_norm,
                            loader.require(layer_tensor(il, "post_ffw_norm"), {n_embd, 1, 1, 1}, WeightUse::kVector));
    }
  }
  CERA_ASSIGN_OR_RETURN(head_, load_output_head(loader, backend_, token_embd_, n_embd, n_vocab, "output_norm.weight", shard));
  buffers_ = loader.take_buffers();
  hp = rank_hp;
  for (AttentionSpec& a : spec_.attention) a = rank_attention_spec(a, hp);
  CERA_ASSIGN_OR_RETURN(Scratch s, Scratch::create(backend_, {.n_embd = n_embd,
                                                              .q_width = int64_t(hp.n_head) * hp.head_dim,
                                                              .kv_width = int64_t(hp.n_head_kv) * hp.head_dim,
                                                              .n_ff = hp.n_ff,
                                                              .n_vocab = n_vocab,
                                                              .n_vocab_part = vocab_.split ? head_.output.rows() : 0,
                                                              .max_tokens = options.max_batch_tokens}));
  scratch_.emplace(std::move(s));
  return {};
}

// Local layers (a sliding window in their AttentionSpec) are the cache's ring layers.
KvGeometry DenseDecoder::kv_geometry() const {
  KvGeometry g{.n_layer = spec_.hp.n_layer, .kv_width = spec_.hp.n_head_kv * spec_.hp.head_dim};
  for (const AttentionSpec& a : spec_.attention) {
    g.sliding.push_back(a.params.sliding_window > 0);
    g.sliding_window = std::max(g.sliding_window, a.params.sliding_window);
  }
  if (!g.has_sliding()) g.sliding.clear();
  return g;
}

Status DenseDecoder::forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> logits) {
  const HParams& hp = spec_.hp;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.output_rows.size());
  if (n == 0 || n > scratch_->max_tokens()) {
    return invalid_argument("batch of " + std::to_string(n) + " tokens, expected 1.." +
                            std::to_string(scratch_->max_tokens()));
  }
  if (kv.size() != layers_.size()) return invalid_argument("KV cache has the wrong number of layers");
  const KvGeometry geometry = kv_geometry();
  if (geometry.has_sliding() && !has_ring_tables(batch)) {
    return invalid_argument("batch has no ring tables for the sliding-window layers (ForwardBatch::ring)");
  }
  CERA_RETURN_IF_ERROR(check_output_buffer(batch, logits, hp.n_vocab, hp.n_embd));
  CERA_RETURN_IF_ERROR(check_token_ids(batch, backend_, hp.n_vocab));
  const Scratch& s = *scratch_;
  const TensorView x = s.x(n), h = s.h(n);
  embed_batch(backend_, x, token_embd_, batch, hp.embedding_scale, vocab_);
  if (vocab_.split) reduce(x);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const DenseLayer& l = layers_[il];
    backend_.rms_norm(h, x, l.attn_norm, hp.rms_eps);
    const LayerCache cache = layer_cache(batch, kv[il], geometry.is_sliding(static_cast<int32_t>(il)));
    attention_forward(backend_, s, l.attention, spec_.attention[il], cache, h, h);
    reduce(h);
    if (l.post_attention_norm) backend_.rms_norm(h, h, *l.post_attention_norm, hp.rms_eps);
    backend_.add_scaled(x, x, h, hp.residual_scale);
    backend_.rms_norm(h, x, l.ffn_norm, hp.rms_eps);
    ffn_forward(backend_, s, l.ffn, spec_.activation, h, h);
    reduce(h);
    if (l.post_ffw_norm) backend_.rms_norm(h, h, *l.post_ffw_norm, hp.rms_eps);
    backend_.add_scaled(x, x, h, hp.residual_scale);
  }
  if (n_out == 0) return {};
  const TensorView out = output_head_forward(backend_, s, head_,
                                             {.rms_eps = hp.rms_eps,
                                              .logit_scale = hp.logit_scale,
                                              .final_softcap = hp.final_logit_softcap,
                                              .output = batch.output,
                                              .collective = vocab_.split ? collective_ : nullptr},
                                             x, batch.output_rows, logits);
  if (batch.output == ForwardOutput::kLogits) last_logits_ = out;
  return {};
}

}  // namespace

DenseSpec default_dense_spec(const HParams& hp) {
  DenseSpec spec;
  spec.hp = hp;
  if (spec.hp.swa_layers.empty()) spec.hp.swa_layers.assign(hp.n_layer, false);
  for (int il = 0; il < hp.n_layer; ++il) spec.attention.push_back(attention_spec(spec.hp, il));
  return spec;
}

Result<std::unique_ptr<Model>> make_dense_decoder(const format::GgufFile& file, ops::Backend& backend, DenseSpec spec,
                                                  const LoadOptions& options) {
  auto model = std::make_unique<DenseDecoder>(backend, std::move(spec));
  CERA_RETURN_IF_ERROR(model->load(file, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace cera::model
