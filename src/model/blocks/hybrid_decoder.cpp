// HybridDecoder: loading (mixer and FFN weights chosen per layer), the KV geometry with the
// recurrent-state layers, and forward(). The convolution of each layer runs once per sequence
// run of the batch (SequenceRun), over all of that sequence's tokens in the batch.
#include "model/blocks/hybrid_decoder.h"

#include <optional>

#include "model/blocks/embedding.h"
#include "model/blocks/ffn.h"
#include "model/blocks/output_head.h"
#include "model/blocks/moe.h"
#include "model/blocks/short_conv.h"
#include "ops/collective.h"
#include "model/shard_hparams.h"

namespace cera::model {
namespace {

struct HybridLayer {
  TensorView attn_norm;  // [n_embd]: before the mixer (lfm2's operator_norm)
  std::optional<AttentionWeights> attention;
  std::optional<ShortConvWeights> conv;
  TensorView ffn_norm;   // [n_embd]
  std::optional<FfnWeights> ffn;
  std::optional<MoeWeights> moe;
};

class HybridDecoder final : public Model {
 public:
  HybridDecoder(ops::Backend& backend, HybridSpec spec) : backend_(backend), spec_(std::move(spec)) {}

  Status load(const format::GgufFile& file, const LoadOptions& options);

  const HParams& hparams() const override { return spec_.hp; }
  KvGeometry kv_geometry() const override {
    KvGeometry g{.n_layer = spec_.hp.n_layer, .kv_width = spec_.hp.n_head_kv * spec_.hp.head_dim, .kinds = spec_.mixers};
    if (g.has_state()) g.state_ne = {spec_.hp.shortconv_l_cache - 1, conv_channels_};
    return g;
  }
  ops::RopeParams rope_params(int32_t il) const override { return spec_.attention[il].rope; }
  ops::Backend& backend() override { return backend_; }
  Status forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> logits) override;
  DeviceLogits device_logits() const override { return {last_logits_, 0.0f}; }

 private:
  // Tensor parallel: the sum over the ranks of a row-split Linear's partial outputs.
  void reduce(const TensorView& t) const {
    if (collective_ != nullptr) collective_->all_reduce_sum(t);
  }

  ops::Backend& backend_;
  HybridSpec spec_;  // hp and attention: the rank's heads and FFN columns when split
  ops::Collective* collective_ = nullptr;
  VocabShard vocab_;
  int64_t conv_channels_ = 0;  // n_embd / n_ranks: the convolution channels this rank holds
  TensorView token_embd_;   // [n_embd, n_vocab], or the rank's vocabulary rows
  std::vector<HybridLayer> layers_;
  OutputHead head_;
  std::vector<std::unique_ptr<ops::Buffer>> buffers_;
  std::optional<Scratch> scratch_;
  TensorView last_logits_;  // [n_vocab, n_out] of the last forward, in scratch
  std::optional<ShortConvScratch> conv_scratch_;
  std::optional<MoeScratch> moe_scratch_;
};

Status HybridDecoder::load(const format::GgufFile& file, const LoadOptions& options) {
  HParams& hp = spec_.hp;  // the whole model's while loading, the rank's after
  const ShardSpec& shard = options.shard;
  collective_ = shard.split() ? options.collective : nullptr;
  const int64_t n_embd = hp.n_embd;
  bool any_conv = false, any_moe = false;
  for (int il = 0; il < hp.n_layer; ++il) {
    any_conv |= spec_.mixers[il] == LayerKind::kShortConv;
    any_moe |= spec_.ffns[il] == FfnKind::kMoe;
  }
  if (any_conv && !backend_.supports(ops::Feature::kShortConv)) {
    return unsupported("this model's short-convolution layers need short_conv, which " + backend_.name() + " lacks");
  }
  if (any_moe && !backend_.supports(ops::Feature::kMoe)) {
    return unsupported("this model's expert layers need the MoE verbs, which " + backend_.name() + " lacks");
  }
  WeightLoader loader(file, backend_);
  const auto embd_shape = loader.shape_of("token_embd.weight");
  if (!embd_shape) return not_found("tensor 'token_embd.weight' is missing");
  hp.n_vocab = static_cast<int32_t>((*embd_shape)[1]);
  const int64_t n_vocab = hp.n_vocab;
  CERA_ASSIGN_OR_RETURN(const HParams rank_hp, shard_hparams(hp, shard));
  CERA_ASSIGN_OR_RETURN(vocab_, vocab_shard(n_vocab, shard));
  CERA_ASSIGN_OR_RETURN(token_embd_, loader.require_shard("token_embd.weight", {n_embd, n_vocab, 1, 1}, WeightUse::kEmbedding,
                                                          ShardSplit::kOutputs, {.what = "vocabulary row"}, shard));
  const MoeShape moe{.n_embd = n_embd, .n_ff_exp = hp.n_ff_exp, .n_expert = hp.n_expert, .n_expert_used = hp.n_expert_used};
  layers_.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    HybridLayer& l = layers_[il];
    CERA_ASSIGN_OR_RETURN(l.attn_norm, loader.require(layer_tensor(il, "attn_norm"), {n_embd, 1, 1, 1}, WeightUse::kVector));
    if (spec_.mixers[il] == LayerKind::kAttention) {
      CERA_ASSIGN_OR_RETURN(l.attention, load_attention(loader, il, n_embd, spec_.attention[il], shard));
    } else {
      CERA_ASSIGN_OR_RETURN(l.conv, load_short_conv(loader, il, n_embd, hp.shortconv_l_cache, shard));
      conv_channels_ = l.conv->conv.rows();
    }
    CERA_ASSIGN_OR_RETURN(l.ffn_norm, loader.require(layer_tensor(il, "ffn_norm"), {n_embd, 1, 1, 1}, WeightUse::kVector));
    if (spec_.ffns[il] == FfnKind::kDense) {
      CERA_ASSIGN_OR_RETURN(l.ffn, load_ffn(loader, il, n_embd, hp.n_ff, shard));
    } else {
      CERA_ASSIGN_OR_RETURN(l.moe, load_moe(loader, il, moe, spec_.selection_bias, shard));
    }
  }
  CERA_ASSIGN_OR_RETURN(head_, load_output_head(loader, backend_, token_embd_, n_embd, n_vocab, spec_.output_norm, shard));
  buffers_ = loader.take_buffers();
  hp = rank_hp;
  for (AttentionSpec& a : spec_.attention) a = rank_attention_spec(a, hp);
  const MoeShape rank_moe{.n_embd = n_embd, .n_ff_exp = hp.n_ff_exp, .n_expert = hp.n_expert, .n_expert_used = hp.n_expert_used};
  const int64_t max_tokens = options.max_batch_tokens;
  CERA_ASSIGN_OR_RETURN(Scratch s, Scratch::create(backend_, {.n_embd = n_embd,
                                                              .q_width = int64_t(hp.n_head) * hp.head_dim,
                                                              .kv_width = std::max<int64_t>(1, int64_t(hp.n_head_kv) * hp.head_dim),
                                                              .n_ff = hp.n_ff,
                                                              .n_vocab = n_vocab,
                                                              .n_vocab_part = vocab_.split ? head_.output.rows() : 0,
                                                              .max_tokens = max_tokens}));
  scratch_.emplace(std::move(s));
  if (any_conv) {
    CERA_ASSIGN_OR_RETURN(ShortConvScratch c, ShortConvScratch::create(backend_, conv_channels_, max_tokens));
    conv_scratch_.emplace(std::move(c));
  }
  if (any_moe) {
    CERA_ASSIGN_OR_RETURN(MoeScratch m, MoeScratch::create(backend_, rank_moe, max_tokens));
    moe_scratch_.emplace(std::move(m));
  }
  return {};
}

Status HybridDecoder::forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> logits) {
  const HParams& hp = spec_.hp;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.output_rows.size());
  if (n == 0 || n > scratch_->max_tokens()) {
    return invalid_argument("batch of " + std::to_string(n) + " tokens, expected 1.." + std::to_string(scratch_->max_tokens()));
  }
  if (kv.size() != layers_.size()) return invalid_argument("KV cache has the wrong number of layers");
  CERA_RETURN_IF_ERROR(check_output_buffer(batch, logits, hp.n_vocab, hp.n_embd));
  CERA_RETURN_IF_ERROR(check_token_ids(batch, backend_, hp.n_vocab));
  std::vector<SequenceRun> runs;
  std::vector<TensorView> layer_states;  // [n_seqs] of the current layer
  if (conv_scratch_) {
    CERA_ASSIGN_OR_RETURN(runs, sequence_runs(batch));
    const size_t n_layer = layers_.size();
    for (const SequenceRun& r : runs) {
      if (r.seq < 0 || (static_cast<size_t>(r.seq) + 1) * n_layer > batch.recurrent_state.size()) {
        return invalid_argument("batch: no recurrent state for sequence " + std::to_string(r.seq));
      }
    }
    layer_states.resize(batch.recurrent_state.size() / n_layer);
    CERA_RETURN_IF_ERROR(check_state_checkpoints(batch, n_layer));
  }
  const Scratch& s = *scratch_;
  const TensorView x = s.x(n), h = s.h(n);
  embed_batch(backend_, x, token_embd_, batch, 1.0f, vocab_);
  if (vocab_.split) reduce(x);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const HybridLayer& l = layers_[il];
    backend_.rms_norm(h, x, l.attn_norm, hp.rms_eps);
    if (l.attention) {
      attention_forward(backend_, s, *l.attention, spec_.attention[il], layer_cache(batch, kv[il], false), h, h);
    } else {
      for (size_t j = 0; j < layer_states.size(); ++j) layer_states[j] = batch.recurrent_state[j * layers_.size() + il];
      short_conv_forward(backend_, *conv_scratch_, *l.conv, runs, layer_states, batch.state_checkpoints, il, h, h);
    }
    reduce(h);
    backend_.add_scaled(x, x, h, 1.0f);
    backend_.rms_norm(h, x, l.ffn_norm, hp.rms_eps);
    if (l.ffn) {
      ffn_forward(backend_, s, *l.ffn, ops::Activation::kSilu, h, h);
    } else {
      moe_forward(backend_, *moe_scratch_, *l.moe, spec_.router, h, h);
    }
    reduce(h);
    backend_.add_scaled(x, x, h, 1.0f);
  }
  if (n_out == 0) return {};
  const TensorView out = output_head_forward(
      backend_, s, head_,
      {.rms_eps = hp.rms_eps, .output = batch.output, .collective = vocab_.split ? collective_ : nullptr}, x,
      batch.output_rows, logits);
  if (batch.output == ForwardOutput::kLogits) last_logits_ = out;
  return {};
}

}  // namespace

HybridSpec default_hybrid_spec(const HParams& hp) {
  HybridSpec spec;
  spec.hp = hp;
  HParams full_attention = hp;  // the hybrid families' attention layers see the whole context
  full_attention.swa_layers.clear();
  for (int il = 0; il < hp.n_layer; ++il) {
    const bool conv = !hp.n_head_kv_layer.empty() && hp.n_head_kv_layer[il] == 0;
    spec.mixers.push_back(conv ? LayerKind::kShortConv : LayerKind::kAttention);
    spec.ffns.push_back(FfnKind::kDense);
    AttentionSpec a = attention_spec(full_attention, il);
    a.qk_norm = true;
    spec.attention.push_back(a);
  }
  spec.router = {.n_expert_used = hp.n_expert_used,
                 .gating = hp.expert_gating,
                 .normalize = hp.expert_weights_norm,
                 .scale = hp.expert_weights_scale,
                 .selection_bias = nullptr};
  return spec;
}

Result<std::unique_ptr<Model>> make_hybrid_decoder(const format::GgufFile& file, ops::Backend& backend, HybridSpec spec,
                                                   const LoadOptions& options) {
  auto model = std::make_unique<HybridDecoder>(backend, std::move(spec));
  CERA_RETURN_IF_ERROR(model->load(file, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace cera::model
