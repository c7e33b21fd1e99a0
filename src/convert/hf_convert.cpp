// Name mapping, shape checks and metadata for HF -> GGUF. Every HF tensor must map to a GGUF
// name (an unknown one is an error, not silently dropped), and every expected tensor must be
// present with the shape config.json implies, before anything is written.
#include "convert/hf_convert.h"

#include <cstring>
#include <map>

#include "format/gguf_writer.h"
#include "convert/hf_plan.h"
#include "convert/hf_tokenizer.h"
#include "convert/quantize.h"
#include "convert/safetensors.h"
#include "core/output_file.h"

namespace cera::convert {

uint64_t permuted_source_row(uint64_t row, uint64_t head_dim) {
  const uint64_t head = row / head_dim, r = row % head_dim, half = head_dim / 2;
  return head * head_dim + (r % 2) * half + r / 2;
}

namespace {

// Per-layer HF suffix -> GGUF suffix, with the shape it must have and whether it is optional.
struct LayerTensor {
  const char* hf;
  const char* gguf;
  bool optional;
};
constexpr LayerTensor kLayerTensors[] = {
    {"input_layernorm.weight", "attn_norm.weight", false},
    {"self_attn.q_proj.weight", "attn_q.weight", false},
    {"self_attn.k_proj.weight", "attn_k.weight", false},
    {"self_attn.v_proj.weight", "attn_v.weight", false},
    {"self_attn.o_proj.weight", "attn_output.weight", false},
    {"self_attn.q_proj.bias", "attn_q.bias", true},
    {"self_attn.k_proj.bias", "attn_k.bias", true},
    {"self_attn.v_proj.bias", "attn_v.bias", true},
    {"self_attn.o_proj.bias", "attn_output.bias", true},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", true},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", true},
    {"post_attention_layernorm.weight", "ffn_norm.weight", false},
    {"mlp.gate_proj.weight", "ffn_gate.weight", false},
    {"mlp.up_proj.weight", "ffn_up.weight", false},
    {"mlp.down_proj.weight", "ffn_down.weight", false},
};

std::vector<uint64_t> layer_shape(const std::string& hf, const HfConfig& c) {
  const uint64_t e = c.n_embd, hd = c.head_dim(), q = uint64_t{c.n_head} * hd, kv = uint64_t{c.head_count_kv()} * hd;
  if (hf == "input_layernorm.weight" || hf == "post_attention_layernorm.weight") return {e};
  if (hf == "self_attn.q_proj.weight") return {q, e};
  if (hf == "self_attn.k_proj.weight" || hf == "self_attn.v_proj.weight") return {kv, e};
  if (hf == "self_attn.o_proj.weight") return {e, q};
  if (hf == "self_attn.q_proj.bias") return {q};
  if (hf == "self_attn.k_proj.bias" || hf == "self_attn.v_proj.bias") return {kv};
  if (hf == "self_attn.o_proj.bias") return {e};
  if (hf == "self_attn.q_norm.weight" || hf == "self_attn.k_norm.weight") return {hd};
  if (hf == "mlp.gate_proj.weight" || hf == "mlp.up_proj.weight") return {c.n_ff, e};
  return {e, c.n_ff};  // mlp.down_proj.weight
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

PlanBuilder::PlanBuilder(const SafetensorsCheckpoint& ckpt, bool permute_qk) : ckpt_(ckpt), permute_qk_(permute_qk) {
  for (const auto& [name, t] : ckpt.by_name()) used_[name] = false;
}

Status PlanBuilder::check(const StTensor& t, const std::string& hf, const std::vector<uint64_t>& shape) const {
  if (t.shape != shape) {
    return invalid_argument(t.file + ": tensor '" + hf + "' has shape " + shape_str(t.shape) + ", config.json implies " +
                            shape_str(shape));
  }
  return {};
}

Status PlanBuilder::take(const std::string& hf, std::string gguf, std::vector<uint64_t> shape, bool optional, Permute p) {
  const StTensor* t = ckpt_.find(hf);
  if (!t) {
    if (optional) return {};
    return not_found("missing tensor '" + hf + "'");
  }
  used_[hf] = true;
  CERA_RETURN_IF_ERROR(check(*t, hf, shape));
  plan_.push_back({std::move(gguf), t, std::move(shape), permute_qk_ ? p : Permute::kNone, {}});
  return {};
}

Status PlanBuilder::take_squeezed(const std::string& hf, std::string gguf, const std::vector<uint64_t>& hf_shape,
                                  std::vector<uint64_t> shape) {
  const StTensor* t = ckpt_.find(hf);
  if (!t) return not_found("missing tensor '" + hf + "'");
  used_[hf] = true;
  CERA_RETURN_IF_ERROR(check(*t, hf, hf_shape));
  plan_.push_back({std::move(gguf), t, std::move(shape), Permute::kNone, {}});
  return {};
}

Status PlanBuilder::take_stack(const std::vector<std::string>& hf, std::string gguf, const std::vector<uint64_t>& each) {
  Planned p{std::move(gguf), nullptr, {hf.size()}, Permute::kNone, {}};
  p.expected.insert(p.expected.end(), each.begin(), each.end());
  for (const std::string& name : hf) {
    const StTensor* t = ckpt_.find(name);
    if (!t) return not_found("missing tensor '" + name + "'");
    used_[name] = true;
    CERA_RETURN_IF_ERROR(check(*t, name, each));
    p.stack.push_back(t);
  }
  p.src = p.stack.empty() ? nullptr : p.stack[0];
  plan_.push_back(std::move(p));
  return {};
}

Status PlanBuilder::check_all_used() const {
  for (const auto& [name, u] : used_) {
    if (u) continue;
    if (name.size() > 22 && name.compare(name.size() - 22, 22, ".rotary_emb.inv_freq") == 0) continue;
    return unsupported(ckpt_.find(name)->file + ": tensor '" + name + "' has no GGUF mapping for this architecture");
  }
  return {};
}

namespace {

Result<std::vector<Planned>> plan_tensors(const SafetensorsCheckpoint& ckpt, const HfConfig& c,
                                          std::vector<std::string>& notes) {
  PlanBuilder b(ckpt, arch_info(c.arch).permute_qk);
  if (c.arch == HfArch::kBert) {
    CERA_RETURN_IF_ERROR(plan_bert(b, c, notes));
    CERA_RETURN_IF_ERROR(b.check_all_used());
    return std::move(b.plan());
  }
  CERA_RETURN_IF_ERROR(b.take("model.embed_tokens.weight", "token_embd.weight", {c.n_vocab, c.n_embd}, false));
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    if (is_hybrid_family(c.arch)) {
      CERA_RETURN_IF_ERROR(plan_hybrid_layer(b, c, l));
      continue;
    }
    const std::string hf_prefix = "model.layers." + std::to_string(l) + ".";
    const std::string gguf_prefix = "blk." + std::to_string(l) + ".";
    for (const LayerTensor& lt : kLayerTensors) {
      const std::string hf = lt.hf;
      const Permute p = hf.rfind("self_attn.q_proj.", 0) == 0   ? Permute::kQ
                        : hf.rfind("self_attn.k_proj.", 0) == 0 ? Permute::kK
                                                                : Permute::kNone;
      const bool optional = lt.optional && !(c.arch == HfArch::kQwen3 && hf.find("_norm.") != std::string::npos);
      CERA_RETURN_IF_ERROR(b.take(hf_prefix + hf, gguf_prefix + lt.gguf, layer_shape(hf, c), optional, p));
    }
  }
  const bool lfm2_family = c.arch == HfArch::kLfm2 || c.arch == HfArch::kLfm2Moe;
  if (lfm2_family) {
    CERA_RETURN_IF_ERROR(b.take("model.embedding_norm.weight", "token_embd_norm.weight", {c.n_embd}, false));
  } else {
    CERA_RETURN_IF_ERROR(b.take("model.norm.weight", "output_norm.weight", {c.n_embd}, false));
  }
  if (c.tie_word_embeddings) {
    if (b.has("lm_head.weight")) {
      b.mark_used("lm_head.weight");
      notes.push_back("tie_word_embeddings: lm_head.weight not written (output uses token_embd)");
    }
  } else {
    CERA_RETURN_IF_ERROR(b.take("lm_head.weight", "output.weight", {c.n_vocab, c.n_embd}, false));
  }
  CERA_RETURN_IF_ERROR(b.check_all_used());
  return std::move(b.plan());
}

void write_metadata(const HfConfig& c, const std::string& name, DType type, format::GgufWriter& w) {
  const HfArchInfo& a = arch_info(c.arch);
  const std::string p = std::string(a.gguf_name) + ".";
  w.set_string("general.architecture", a.gguf_name);
  w.set_string("general.type", "model");
  w.set_string("general.name", name);
  w.set_u32(p + "block_count", c.n_layer);
  if (c.n_ctx) w.set_u32(p + "context_length", *c.n_ctx);
  w.set_u32(p + "embedding_length", c.n_embd);
  w.set_u32(p + "feed_forward_length", c.n_ff);
  w.set_u32(p + "attention.head_count", c.n_head);
  const bool per_layer_kv = c.arch == HfArch::kLfm2 || c.arch == HfArch::kLfm2Moe;  // an array, below
  if (c.n_head_kv && !per_layer_kv) w.set_u32(p + "attention.head_count_kv", *c.n_head_kv);
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::kLinear || s.type == RopeScalingType::kYarn) {
    w.set_string(p + "rope.scaling.type", s.type == RopeScalingType::kLinear ? "linear" : "yarn");
    w.set_f32(p + "rope.scaling.factor", static_cast<float>(s.factor));
    if (s.type == RopeScalingType::kYarn) w.set_u32(p + "rope.scaling.original_context_length", *s.original_context);
  }
  if (c.rope_theta) w.set_f32(p + "rope.freq_base", static_cast<float>(*c.rope_theta));
  w.set_f32(p + (c.arch == HfArch::kBert ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"),
            static_cast<float>(c.rms_eps));
  if (c.explicit_head_dim) {
    w.set_u32(p + "attention.key_length", *c.explicit_head_dim);
    w.set_u32(p + "attention.value_length", *c.explicit_head_dim);
  }
  w.set_u32("general.file_type", llama_file_type(type));
  if (a.writes_vocab_size) {
    w.set_u32(p + "vocab_size", c.n_vocab);
    w.set_u32(p + "rope.dimension_count", c.head_dim());
  }
  if (is_hybrid_family(c.arch)) write_hybrid_metadata(c, w);
  if (c.arch == HfArch::kGranite) {
    // llama.cpp writes each only when truthy (present and non-zero).
    auto put = [&](const std::string& key, const std::optional<double>& v) {
      if (v && *v != 0.0) w.set_f32(p + key, static_cast<float>(*v));
    };
    put("attention.scale", c.attention_multiplier);
    put("embedding_scale", c.embedding_multiplier);
    put("residual_scale", c.residual_multiplier);
    put("logit_scale", c.logits_scaling);
  }
}

// A TensorFill that reads the source rows (permuted when asked) and converts them to `type`.
format::TensorFill make_fill(const Planned& t, DType type, const HfConfig& c, int n_threads) {
  return [&t, type, &c, n_threads](std::span<std::byte> out) -> Status {
    const StTensor& src = *t.src;
    const uint64_t n_cols = src.shape.back();
    const uint64_t n_rows = src.n_elements() / n_cols;
    const uint64_t heads = t.permute == Permute::kQ ? c.n_head : c.head_count_kv();
    if (src.shape.size() == 1 && t.permute != Permute::kNone) {
      // A bias: the permutation runs along its only dimension.
      const uint64_t hd = n_cols / heads;
      std::vector<float> all(n_cols);
      src.read_f32(0, n_cols, all.data());
      return quantize_tensor({type, n_cols, 1, [&](uint64_t, float* row) {
                                for (uint64_t i = 0; i < n_cols; ++i) row[i] = all[permuted_source_row(i, hd)];
                              }, 1}, out);
    }
    if (!t.stack.empty()) {
      // Experts stacked along the outer dimension: GGUF row r is row r % n_rows of expert r / n_rows.
      return quantize_tensor({type, n_cols, n_rows * t.stack.size(), [&](uint64_t r, float* row) {
                                t.stack[r / n_rows]->read_f32((r % n_rows) * n_cols, n_cols, row);
                              }, n_threads}, out);
    }
    const uint64_t hd = t.permute == Permute::kNone ? 0 : n_rows / heads;
    return quantize_tensor({type, n_cols, n_rows, [&](uint64_t r, float* row) {
                              const uint64_t s = hd ? permuted_source_row(r, hd) : r;
                              src.read_f32(s * n_cols, n_cols, row);
                            }, n_threads}, out);
  };
}

}  // namespace

Result<HfConvertReport> convert_hf(const HfConvertRequest& req, const format::WriteProgress& progress) {
  if (!is_output_type(req.type)) return invalid_argument("output type " + std::string(dtype_name(req.type)) + " is not supported");
  // Every file of the checkpoint folder is an input the output must not replace.
  std::vector<std::filesystem::path> inputs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(req.dir, ec)) inputs.push_back(entry.path());
  CERA_RETURN_IF_ERROR(check_output_path(req.output, inputs));  // before any work
  CERA_ASSIGN_OR_RETURN(const HfConfig config, read_hf_config(req.dir));
  CERA_ASSIGN_OR_RETURN(const SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::open_dir(req.dir));
  HfConvertReport report;
  report.gguf_arch = arch_info(config.arch).gguf_name;
  auto plan = plan_tensors(ckpt, config, report.notes);
  if (!plan.ok()) return plan.status().with_context(req.dir.string());

  format::GgufWriter w;
  std::string name = req.name;
  if (name.empty()) name = std::filesystem::absolute(req.dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::absolute(req.dir).lexically_normal().parent_path().filename().string();
  write_metadata(config, name, req.type, w);
  if (config.arch == HfArch::kBert) {
    CERA_RETURN_IF_ERROR(write_bert_metadata(req.dir, config, w, report.notes));
    CERA_RETURN_IF_ERROR(add_wordpiece_tokenizer(req.dir, config, w, report.notes));
  } else {
    CERA_RETURN_IF_ERROR(add_hf_tokenizer(req.dir, config, w, report.notes));
  }

  // llama.cpp emits generated tensors (rope_freqs) before the checkpoint's own.
  std::vector<float> rope_freqs;
  if (config.rope_scaling.type == RopeScalingType::kLlama3) {
    if (!arch_info(config.arch).permute_qk) {
      return unsupported(req.dir.string() + ": llama3 rope scaling on a non-llama architecture");
    }
    rope_freqs = llama3_rope_factors(config);
    CERA_RETURN_IF_ERROR(w.add_tensor_fill({"rope_freqs.weight", DType::kF32, {rope_freqs.size()}},
                                      [&rope_freqs](std::span<std::byte> out) -> Status {
                                        std::memcpy(out.data(), rope_freqs.data(), out.size());
                                        return {};
                                      }));
  }
  for (const Planned& t : *plan) {
    std::vector<uint64_t> shape(t.expected.rbegin(), t.expected.rend());  // GGUF order
    const TypeChoice choice = choose_tensor_type(req.type, t.gguf_name, shape);
    if (choice.fallback) report.notes.push_back(t.gguf_name + ": " + *choice.fallback);
    CERA_RETURN_IF_ERROR(w.add_tensor_fill({t.gguf_name, choice.dtype, shape}, make_fill(t, choice.dtype, config, req.n_threads)));
  }
  report.n_tensors = w.n_tensors();
  CERA_RETURN_IF_ERROR(w.write(req.output, progress, inputs));
  return report;
}

}  // namespace cera::convert
