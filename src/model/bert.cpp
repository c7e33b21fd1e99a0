// bert: the BERT encoder of sentence-transformers checkpoints (all-MiniLM-L6-v2 and kin). Learned
// absolute positions and token types are added to the token embedding and LayerNormed; each layer
// is post-norm (x = LN(x + attn(x)); x = LN(x + ffn(x))) with biased projections and a GELU (erf)
// FFN. Decision: attention is bidirectional (AttentionParams::causal = false) over the paged cache,
// like the decoders' cache, so the runtime's batching needs nothing new; a sequence must then be
// whole inside one forward(), and only the hidden states (ForwardOutput::kHidden) are computed.
#include <algorithm>
#include <string>
#include <vector>

#include "model/archs.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/output_head.h"
#include "model/blocks/scratch.h"

namespace cera::model {
namespace {

// --- hyper-parameters --------------------------------------------------------------------

AttentionSpec bert_attention(const HParams& hp) {
  AttentionSpec a = attention_spec(hp, 0);
  a.params.causal = false;
  a.rotary = false;
  return a;
}

// --- weights -----------------------------------------------------------------------------

struct BertLayer {
  AttentionWeights attention;     // biased Q/K/V/output
  TensorView attn_norm, attn_norm_b;  // [n_embd] attn_output_norm weight, bias
  TensorView ffn_up, ffn_up_b;        // [n_embd, n_ff], [n_ff]
  TensorView ffn_down, ffn_down_b;    // [n_ff, n_embd], [n_embd]
  TensorView out_norm, out_norm_b;    // [n_embd] layer_output_norm weight, bias
};

class Bert final : public Model {
 public:
  Bert(ops::Backend& backend, const HParams& hp) : backend_(backend), hp_(hp), spec_(bert_attention(hp)) {}

  Status load(const format::GgufFile& file, const LoadOptions& options);

  const HParams& hparams() const override { return hp_; }
  KvGeometry kv_geometry() const override { return {.n_layer = hp_.n_layer, .kv_width = hp_.n_head_kv * hp_.head_dim}; }
  ops::RopeParams rope_params(int32_t) const override { return {}; }  // learned positions: nothing to re-rotate
  ops::Backend& backend() override { return backend_; }
  bool causal() const override { return false; }
  Status forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> out) override;
  DeviceLogits device_logits() const override { return {}; }

 private:
  Status check_batch(const ForwardBatch& batch) const;

  ops::Backend& backend_;
  HParams hp_;
  AttentionSpec spec_;
  TensorView token_embd_;     // [n_embd, n_vocab]
  TensorView position_embd_;  // [n_embd, n_ctx_train]
  TensorView token_types_;    // [n_embd, n_token_types]; sentence embeddings use type 0
  TensorView embd_norm_, embd_norm_b_;  // [n_embd]
  std::vector<BertLayer> layers_;
  std::vector<std::unique_ptr<ops::Buffer>> buffers_;
  std::optional<Scratch> scratch_;
  std::vector<int32_t> type_ids_;  // [max_tokens] zeros: every token is of type 0
};

Status Bert::load(const format::GgufFile& file, const LoadOptions& options) {
  WeightLoader loader(file, backend_, options.progress);
  const auto embd_shape = loader.shape_of("token_embd.weight");
  if (!embd_shape) return not_found("tensor 'token_embd.weight' is missing");
  hp_.n_vocab = static_cast<int32_t>((*embd_shape)[1]);
  const int64_t n_embd = hp_.n_embd, n_ff = hp_.n_ff, width = int64_t(hp_.n_head) * hp_.head_dim;
  if (width != n_embd) {
    return invalid_argument("bert: head_count " + std::to_string(hp_.n_head) + " x head_dim " +
                            std::to_string(hp_.head_dim) + " must equal embedding_length " + std::to_string(n_embd));
  }
  const auto vec = [&](const std::string& name) { return loader.require(name, {n_embd, 1, 1, 1}, WeightUse::kVector); };
  CERA_ASSIGN_OR_RETURN(token_embd_, loader.require("token_embd.weight", {n_embd, hp_.n_vocab, 1, 1}, WeightUse::kEmbedding));
  CERA_ASSIGN_OR_RETURN(position_embd_, loader.require("position_embd.weight", {n_embd, hp_.n_ctx_train, 1, 1},
                                                       WeightUse::kEmbedding));
  const auto types_shape = loader.shape_of("token_types.weight");
  if (!types_shape) return not_found("tensor 'token_types.weight' is missing");
  CERA_ASSIGN_OR_RETURN(token_types_, loader.require("token_types.weight", {n_embd, std::max<int64_t>((*types_shape)[1], 1), 1, 1},
                                                     WeightUse::kEmbedding));
  CERA_ASSIGN_OR_RETURN(embd_norm_, vec("token_embd_norm.weight"));
  CERA_ASSIGN_OR_RETURN(embd_norm_b_, vec("token_embd_norm.bias"));
  layers_.resize(static_cast<size_t>(hp_.n_layer));
  for (int il = 0; il < hp_.n_layer; ++il) {
    BertLayer& l = layers_[static_cast<size_t>(il)];
    CERA_ASSIGN_OR_RETURN(l.attention, load_attention(loader, il, n_embd, spec_));
    if (!l.attention.bq || !l.attention.bk || !l.attention.bv || !l.attention.bo) {
      return not_found("bert layer " + std::to_string(il) + ": the attention biases (attn_q/k/v/output.bias) are missing");
    }
    CERA_ASSIGN_OR_RETURN(l.attn_norm, vec(layer_tensor(il, "attn_output_norm")));
    CERA_ASSIGN_OR_RETURN(l.attn_norm_b, vec(layer_tensor(il, "attn_output_norm", "bias")));
    CERA_ASSIGN_OR_RETURN(l.ffn_up, loader.require(layer_tensor(il, "ffn_up"), {n_embd, n_ff, 1, 1}, WeightUse::kMatmul));
    CERA_ASSIGN_OR_RETURN(l.ffn_up_b, loader.require(layer_tensor(il, "ffn_up", "bias"), {n_ff, 1, 1, 1}, WeightUse::kVector));
    CERA_ASSIGN_OR_RETURN(l.ffn_down, loader.require(layer_tensor(il, "ffn_down"), {n_ff, n_embd, 1, 1}, WeightUse::kMatmul));
    CERA_ASSIGN_OR_RETURN(l.ffn_down_b, vec(layer_tensor(il, "ffn_down", "bias")));
    CERA_ASSIGN_OR_RETURN(l.out_norm, vec(layer_tensor(il, "layer_output_norm")));
    CERA_ASSIGN_OR_RETURN(l.out_norm_b, vec(layer_tensor(il, "layer_output_norm", "bias")));
  }
  buffers_ = loader.take_buffers();
  CERA_ASSIGN_OR_RETURN(Scratch s, Scratch::create(backend_, {.n_embd = n_embd,
                                                              .q_width = width,
                                                              .kv_width = width,
                                                              .n_ff = n_ff,
                                                              .n_vocab = 1,  // no vocabulary head
                                                              .max_tokens = options.max_batch_tokens}));
  scratch_.emplace(std::move(s));
  type_ids_.assign(static_cast<size_t>(options.max_batch_tokens), 0);
  return {};
}

// --- forward -----------------------------------------------------------------------------

// Every sequence must be whole: its positions 0..len-1, each once, all inside this batch, since
// a token attends to all of them and nothing of an earlier forward() is kept.
Status Bert::check_batch(const ForwardBatch& batch) const {
  if (batch.output != ForwardOutput::kHidden) {
    return unsupported("bert is an encoder: forward() computes hidden states only (ForwardOutput::kHidden), "
                       "not next-token logits");
  }
  if (batch.token_ids != nullptr) return unsupported("bert: token ids on the device (ForwardBatch::token_ids)");
  const auto& pos = batch.attention.positions;
  const auto& seq = batch.attention.token_seq;
  if (pos.size() != batch.tokens.size() || seq.size() != batch.tokens.size()) {
    return invalid_argument("bert: positions and token_seq must have one entry per token");
  }
  const size_t n_seqs = batch.attention.table_offset.empty() ? 0 : batch.attention.table_offset.size() - 1;
  std::vector<int32_t> count(n_seqs, 0), last(n_seqs, -1);
  for (size_t t = 0; t < pos.size(); ++t) {
    if (seq[t] < 0 || static_cast<size_t>(seq[t]) >= n_seqs) return invalid_argument("bert: token_seq out of range");
    if (pos[t] < 0 || pos[t] >= hp_.n_ctx_train) {
      return invalid_argument("bert: position " + std::to_string(pos[t]) + " of token " + std::to_string(t) +
                              " is outside the model's context_length " + std::to_string(hp_.n_ctx_train));
    }
    ++count[static_cast<size_t>(seq[t])];
    last[static_cast<size_t>(seq[t])] = std::max(last[static_cast<size_t>(seq[t])], pos[t]);
  }
  for (size_t j = 0; j < n_seqs; ++j) {
    if (count[j] > 0 && count[j] != last[j] + 1) {
      return invalid_argument("bert: sequence " + std::to_string(j) + " has " + std::to_string(count[j]) +
                              " tokens but positions up to " + std::to_string(last[j]) +
                              "; an encoder needs each sequence whole (positions 0..len-1) in one forward");
    }
  }
  return {};
}

Status Bert::forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv, std::span<float> out) {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0 || n > scratch_->max_tokens()) {
    return invalid_argument("batch of " + std::to_string(n) + " tokens, expected 1.." +
                            std::to_string(scratch_->max_tokens()));
  }
  if (kv.size() != layers_.size()) return invalid_argument("KV cache has the wrong number of layers");
  CERA_RETURN_IF_ERROR(check_batch(batch));
  CERA_RETURN_IF_ERROR(check_output_buffer(batch, out, hp_.n_vocab, hp_.n_embd));
  CERA_RETURN_IF_ERROR(check_token_ids(batch, backend_, hp_.n_vocab));
  const Scratch& s = *scratch_;
  const TensorView x = s.x(n), h = s.h(n), up = s.up(n);
  const float eps = hp_.rms_eps;  // layer_norm_epsilon for bert (hparams.cpp)
  backend_.embed(x, token_embd_, batch.tokens, 1.0f);
  backend_.embed(h, position_embd_, batch.attention.positions, 1.0f);
  backend_.add_scaled(x, x, h, 1.0f);
  backend_.embed(h, token_types_, std::span<const int32_t>(type_ids_).first(static_cast<size_t>(n)), 1.0f);
  backend_.add_scaled(x, x, h, 1.0f);
  backend_.layer_norm(x, x, embd_norm_, embd_norm_b_, eps);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const BertLayer& l = layers_[il];
    attention_forward(backend_, s, l.attention, spec_, layer_cache(batch, kv[il], false), x, h);
    backend_.add_scaled(x, x, h, 1.0f);
    backend_.layer_norm(x, x, l.attn_norm, l.attn_norm_b, eps);
    backend_.matmul(up, l.ffn_up, x, &l.ffn_up_b);
    backend_.activation(up, up, ops::Activation::kGeluErf);
    backend_.matmul(h, l.ffn_down, up, &l.ffn_down_b);
    backend_.add_scaled(x, x, h, 1.0f);
    backend_.layer_norm(x, x, l.out_norm, l.out_norm_b, eps);
  }
  const auto n_out = static_cast<int64_t>(batch.output_rows.size());
  if (n_out == 0) return {};
  const TensorView rows = s.h(n_out);
  backend_.embed(rows, x, batch.output_rows, 1.0f);  // gathers the requested rows
  backend_.download(out.data(), rows);
  return {};
}

}  // namespace

Result<std::unique_ptr<Model>> load_bert(const format::GgufFile& file, ops::Backend& backend, const LoadOptions& options) {
  CERA_ASSIGN_OR_RETURN(const HParams hp, read_hparams(file, Arch::kBert));
  auto model = std::make_unique<Bert>(backend, hp);
  CERA_RETURN_IF_ERROR(model->load(file, options));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace cera::model
