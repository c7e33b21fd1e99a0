// The tensor lists and metadata keys of the synthetic architectures, written as the converters
// (and llama.cpp) write them: llama (dense), lfm2 (short-convolution and attention layers, a
// per-layer head_count_kv array with 0 for convolution layers, output norm token_embd_norm),
// qwen3moe (Q/K-normed attention with an explicit head_dim, stacked experts in every layer).
#include "convert/synth_layout.h"

namespace cera::convert {
namespace {

struct Dims {
  uint64_t e, hd, q, kv, ff;  // n_embd, head_dim, n_head * head_dim, n_head_kv * head_dim, n_ff
};

void common_keys(const SynthShape& s, const std::string& p, uint32_t n_vocab, uint32_t head_dim,
                 format::GgufWriter& w) {
  w.set_u32(p + "block_count", s.n_layer);
  w.set_u32(p + "context_length", s.n_ctx);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "feed_forward_length", s.n_ff);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_f32(p + "rope.freq_base", s.rope_theta);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32(p + "vocab_size", n_vocab);
  w.set_u32(p + "rope.dimension_count", head_dim);
}

void attention_tensors(const std::string& b, const Dims& d, bool qk_norm, std::vector<SynthTensor>& out) {
  out.push_back({b + "attn_q.weight", {d.e, d.q}});
  out.push_back({b + "attn_k.weight", {d.e, d.kv}});
  out.push_back({b + "attn_v.weight", {d.e, d.kv}});
  out.push_back({b + "attn_output.weight", {d.q, d.e}});
  if (qk_norm) {
    out.push_back({b + "attn_q_norm.weight", {d.hd}});
    out.push_back({b + "attn_k_norm.weight", {d.hd}});
  }
}

void ffn_tensors(const std::string& b, const Dims& d, std::vector<SynthTensor>& out) {
  out.push_back({b + "ffn_gate.weight", {d.e, d.ff}});
  out.push_back({b + "ffn_up.weight", {d.e, d.ff}});
  out.push_back({b + "ffn_down.weight", {d.ff, d.e}});
}

}  // namespace

std::vector<SynthTensor> synth_layout(const SynthShape& s, uint32_t n_vocab, format::GgufWriter& w) {
  const std::string p = std::string(synth_arch_name(s.arch)) + ".";
  const uint32_t head_dim = s.head_dim != 0 ? s.head_dim : s.n_embd / s.n_head;
  const Dims d{s.n_embd, head_dim, uint64_t{head_dim} * s.n_head, uint64_t{head_dim} * s.n_head_kv, s.n_ff};
  common_keys(s, p, n_vocab, head_dim, w);
  std::vector<SynthTensor> out = {{"token_embd.weight", {d.e, n_vocab}}};
  std::string output_norm = "output_norm.weight";
  switch (s.arch) {
    case SynthArch::kLlama:
      w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
      for (uint32_t l = 0; l < s.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        out.push_back({b + "attn_norm.weight", {d.e}});
        attention_tensors(b, d, false, out);
        out.push_back({b + "ffn_norm.weight", {d.e}});
        ffn_tensors(b, d, out);
      }
      break;
    case SynthArch::kLfm2: {
      std::vector<int32_t> kv_heads(s.n_layer);
      for (uint32_t l = 0; l < s.n_layer; ++l) kv_heads[l] = (s.attention_layers >> l & 1) != 0 ? int32_t(s.n_head_kv) : 0;
      w.set_array(p + "attention.head_count_kv", format::GgufArray::of<int32_t>(kv_heads));
      w.set_u32(p + "shortconv.l_cache", s.l_cache);
      for (uint32_t l = 0; l < s.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        out.push_back({b + "attn_norm.weight", {d.e}});
        if (kv_heads[l] != 0) {
          attention_tensors(b, d, true, out);
        } else {
          out.push_back({b + "shortconv.in_proj.weight", {d.e, 3 * d.e}});
          out.push_back({b + "shortconv.conv.weight", {s.l_cache, d.e}});
          out.push_back({b + "shortconv.out_proj.weight", {d.e, d.e}});
        }
        out.push_back({b + "ffn_norm.weight", {d.e}});
        ffn_tensors(b, d, out);
      }
      output_norm = "token_embd_norm.weight";
      break;
    }
    case SynthArch::kQwen3Moe: {
      w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
      w.set_u32(p + "attention.key_length", head_dim);
      w.set_u32(p + "attention.value_length", head_dim);
      w.set_u32(p + "expert_count", s.n_expert);
      w.set_u32(p + "expert_used_count", s.n_expert_used);
      w.set_u32(p + "expert_feed_forward_length", s.n_ff_exp);
      const uint64_t n_exp = s.n_expert, ff_exp = s.n_ff_exp;
      for (uint32_t l = 0; l < s.n_layer; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        out.push_back({b + "attn_norm.weight", {d.e}});
        attention_tensors(b, d, true, out);
        out.push_back({b + "ffn_norm.weight", {d.e}});
        out.push_back({b + "ffn_gate_inp.weight", {d.e, n_exp}});
        out.push_back({b + "ffn_gate_exps.weight", {d.e, ff_exp, n_exp}});
        out.push_back({b + "ffn_up_exps.weight", {d.e, ff_exp, n_exp}});
        out.push_back({b + "ffn_down_exps.weight", {ff_exp, d.e, n_exp}});
      }
      break;
    }
  }
  out.push_back({output_norm, {d.e}});
  if (!s.tied_output) out.push_back({"output.weight", {d.e, n_vocab}});
  return out;
}

}  // namespace cera::convert
