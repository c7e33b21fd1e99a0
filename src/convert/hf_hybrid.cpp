// HF -> GGUF for lfm2, lfm2moe and qwen3moe, with llama.cpp's names (convert_hf_to_gguf.py's
// LFM2Model, LFM2MoeModel, Qwen3MoeModel): shortconv.{in_proj,conv,out_proj}, the conv kernel
// [n_embd, 1, L] stored as GGUF [L, n_embd] (same bytes), per-expert HF matrices stacked into
// ffn_{gate,up,down}_exps, the expert bias as exp_probs_b.bias, lfm2's final norm as token_embd_norm.
#include <string>

#include "format/gguf_writer.h"
#include "convert/hf_plan.h"

namespace cera::convert {
namespace {

Status plan_attention(PlanBuilder& b, const HfConfig& c, const std::string& hf, const std::string& gg, bool lfm2) {
  const uint64_t e = c.n_embd, hd = c.head_dim(), q = uint64_t{c.n_head} * hd, kv = uint64_t{c.head_count_kv()} * hd;
  CERA_RETURN_IF_ERROR(b.take(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q, e}, false));
  CERA_RETURN_IF_ERROR(b.take(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv, e}, false));
  CERA_RETURN_IF_ERROR(b.take(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv, e}, false));
  CERA_RETURN_IF_ERROR(b.take(hf + (lfm2 ? "self_attn.out_proj.weight" : "self_attn.o_proj.weight"),
                              gg + "attn_output.weight", {e, q}, false));
  CERA_RETURN_IF_ERROR(b.take(hf + (lfm2 ? "self_attn.q_layernorm.weight" : "self_attn.q_norm.weight"),
                              gg + "attn_q_norm.weight", {hd}, false));
  return b.take(hf + (lfm2 ? "self_attn.k_layernorm.weight" : "self_attn.k_norm.weight"), gg + "attn_k_norm.weight",
                {hd}, false);
}

// The experts of one layer: HF names `<prefix>experts.<i>.<gate|up|down>` (per-expert matrices,
// as checkpoints are saved) stacked into the three 3-D GGUF tensors.
Status plan_experts(PlanBuilder& b, const HfConfig& c, const std::string& prefix, const std::string& gg,
                    const char* gate, const char* up, const char* down) {
  const uint64_t e = c.n_embd, f = c.n_ff_exp;
  auto names = [&](const char* w) {
    std::vector<std::string> out;
    for (uint32_t x = 0; x < c.n_expert; ++x) out.push_back(prefix + "experts." + std::to_string(x) + "." + w + ".weight");
    return out;
  };
  CERA_RETURN_IF_ERROR(b.take_stack(names(gate), gg + "ffn_gate_exps.weight", {f, e}));
  CERA_RETURN_IF_ERROR(b.take_stack(names(up), gg + "ffn_up_exps.weight", {f, e}));
  return b.take_stack(names(down), gg + "ffn_down_exps.weight", {e, f});
}

}  // namespace

bool is_hybrid_family(HfArch arch) {
  return arch == HfArch::kLfm2 || arch == HfArch::kLfm2Moe || arch == HfArch::kQwen3Moe;
}

Status plan_hybrid_layer(PlanBuilder& b, const HfConfig& c, uint32_t l) {
  const uint64_t e = c.n_embd;
  const std::string hf = "model.layers." + std::to_string(l) + ".", gg = "blk." + std::to_string(l) + ".";
  if (c.arch == HfArch::kQwen3Moe) {
    CERA_RETURN_IF_ERROR(b.take(hf + "input_layernorm.weight", gg + "attn_norm.weight", {e}, false));
    CERA_RETURN_IF_ERROR(plan_attention(b, c, hf, gg, false));
    CERA_RETURN_IF_ERROR(b.take(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {e}, false));
    CERA_RETURN_IF_ERROR(b.take(hf + "mlp.gate.weight", gg + "ffn_gate_inp.weight", {c.n_expert, e}, false));
    return plan_experts(b, c, hf + "mlp.", gg, "gate_proj", "up_proj", "down_proj");
  }
  // lfm2 / lfm2moe
  CERA_RETURN_IF_ERROR(b.take(hf + "operator_norm.weight", gg + "attn_norm.weight", {e}, false));
  if (c.is_conv_layer(l)) {
    CERA_RETURN_IF_ERROR(b.take(hf + "conv.in_proj.weight", gg + "shortconv.in_proj.weight", {3 * e, e}, false));
    CERA_RETURN_IF_ERROR(b.take_squeezed(hf + "conv.conv.weight", gg + "shortconv.conv.weight", {e, 1, c.conv_l_cache},
                                          {e, c.conv_l_cache}));
    CERA_RETURN_IF_ERROR(b.take(hf + "conv.out_proj.weight", gg + "shortconv.out_proj.weight", {e, e}, false));
  } else {
    CERA_RETURN_IF_ERROR(plan_attention(b, c, hf, gg, true));
  }
  CERA_RETURN_IF_ERROR(b.take(hf + "ffn_norm.weight", gg + "ffn_norm.weight", {e}, false));
  const std::string ff = hf + "feed_forward.";
  if (c.arch == HfArch::kLfm2 || l < c.n_dense_lead) {
    CERA_RETURN_IF_ERROR(b.take(ff + "w1.weight", gg + "ffn_gate.weight", {c.n_ff, e}, false));
    CERA_RETURN_IF_ERROR(b.take(ff + "w3.weight", gg + "ffn_up.weight", {c.n_ff, e}, false));
    return b.take(ff + "w2.weight", gg + "ffn_down.weight", {e, c.n_ff}, false);
  }
  CERA_RETURN_IF_ERROR(b.take(ff + "gate.weight", gg + "ffn_gate_inp.weight", {c.n_expert, e}, false));
  if (c.expert_bias) CERA_RETURN_IF_ERROR(b.take(ff + "expert_bias", gg + "exp_probs_b.bias", {c.n_expert}, false));
  return plan_experts(b, c, ff, gg, "w1", "w3", "w2");
}

void write_hybrid_metadata(const HfConfig& c, format::GgufWriter& w) {
  const std::string p = std::string(arch_info(c.arch).gguf_name) + ".";
  if (c.arch != HfArch::kQwen3Moe) {
    std::vector<int32_t> kv;
    for (uint32_t il = 0; il < c.n_layer; ++il) kv.push_back(c.is_conv_layer(il) ? 0 : static_cast<int32_t>(c.head_count_kv()));
    w.set_array(p + "attention.head_count_kv", format::GgufArray::of<int32_t>(kv));
    w.set_u32(p + "shortconv.l_cache", c.conv_l_cache);
    w.set_u32(p + "vocab_size", c.n_vocab);
  }
  if (c.arch == HfArch::kLfm2) return;
  w.set_u32(p + "expert_count", c.n_expert);
  w.set_u32(p + "expert_used_count", c.n_expert_used);
  w.set_u32(p + "expert_feed_forward_length", c.n_ff_exp);
  w.set_bool(p + "expert_weights_norm", c.norm_topk_prob);
  if (c.arch == HfArch::kLfm2Moe) {
    w.set_u32(p + "leading_dense_block_count", c.n_dense_lead);
    w.set_u32(p + "expert_gating_func", 2);  // sigmoid
  }
}

}  // namespace cera::convert
