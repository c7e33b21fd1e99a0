// Key names and fallbacks follow llama.cpp's TextModel.set_gguf_parameters. transformers 5
// writes rope settings under "rope_parameters" (rope_theta, rope_type, ...) where 4.x wrote
// "rope_theta" and "rope_scaling"; both spellings are read.
#include "convert/hf_config.h"

#include <cmath>
#include <vector>

namespace cera::convert {
namespace {

constexpr HfArchInfo kArchTable[] = {
    {HfArch::kLlama, "LlamaForCausalLM", "llama", true, true},
    {HfArch::kMistral, "MistralForCausalLM", "llama", true, true},
    {HfArch::kQwen2, "Qwen2ForCausalLM", "qwen2", false, false},
    {HfArch::kQwen3, "Qwen3ForCausalLM", "qwen3", false, false},
    {HfArch::kGranite, "GraniteForCausalLM", "granite", true, true},
    {HfArch::kLfm2, "Lfm2ForCausalLM", "lfm2", false, false},
    {HfArch::kLfm2Moe, "Lfm2MoeForCausalLM", "lfm2moe", false, false},
    {HfArch::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3moe", false, false},
    {HfArch::kBert, "BertModel", "bert", false, false},
};

class Reader {
 public:
  Reader(const JsonValue& j, std::string where) : j_(j), where_(std::move(where)) {}

  Result<uint32_t> required_u32(const char* key) const {
    const JsonValue* v = j_.find(key);
    if (!v) return not_found(where_ + ": missing key '" + key + "'");
    return as_u32(*v, key);
  }
  Result<std::optional<uint32_t>> optional_u32(const char* key) const {
    const JsonValue* v = j_.find(key);
    if (!v || v->is_null()) return std::optional<uint32_t>();
    CERA_ASSIGN_OR_RETURN(uint32_t x, as_u32(*v, key));
    return std::optional<uint32_t>(x);
  }
  Result<std::optional<double>> optional_number(const JsonValue& obj, const char* key) const {
    const JsonValue* v = obj.find(key);
    if (!v || v->is_null()) return std::optional<double>();
    if (!v->as_double()) return invalid_argument(where_ + ": key '" + key + "' is not a number");
    return std::optional<double>(*v->as_double());
  }
  std::optional<int64_t> optional_int(const char* key) const {
    const JsonValue* v = j_.find(key);
    return v ? v->as_int() : std::nullopt;
  }
  const std::string& where() const { return where_; }

 private:
  Result<uint32_t> as_u32(const JsonValue& v, const char* key) const {
    const auto i = v.as_int();
    if (!i || *i <= 0 || *i > (int64_t{1} << 31)) {
      return invalid_argument(where_ + ": key '" + key + "' must be a positive integer");
    }
    return static_cast<uint32_t>(*i);
  }
  const JsonValue& j_;
  std::string where_;
};

Status read_rope(const JsonValue& j, const Reader& r, HfConfig& c) {
  const JsonValue* params = j.find("rope_parameters");
  if (!params || params->is_null()) params = j.find("rope_scaling");
  static const JsonValue kEmpty = JsonValue::make_object({});
  if (!params || params->is_null()) params = &kEmpty;
  if (!params->is_object()) return invalid_argument(r.where() + ": 'rope_parameters'/'rope_scaling' is not an object");
  CERA_ASSIGN_OR_RETURN(c.rope_theta, r.optional_number(j, "rope_theta"));
  if (!c.rope_theta) {
    CERA_ASSIGN_OR_RETURN(c.rope_theta, r.optional_number(*params, "rope_theta"));
  }
  const JsonValue* type = params->find("rope_type");
  if (!type) type = params->find("type");
  const std::string t = type && type->as_string() ? *type->as_string() : "default";
  RopeScaling& s = c.rope_scaling;
  CERA_ASSIGN_OR_RETURN(const auto factor, r.optional_number(*params, "factor"));
  CERA_ASSIGN_OR_RETURN(const auto orig, r.optional_number(*params, "original_max_position_embeddings"));
  if (orig) s.original_context = static_cast<uint32_t>(*orig);
  if (t == "default") {
    s.type = RopeScalingType::kNone;
  } else if (t == "linear") {
    if (factor) s = {RopeScalingType::kLinear, *factor, 1.0, 4.0, s.original_context};
  } else if (t == "yarn") {
    if (factor) {
      if (!s.original_context) return not_found(r.where() + ": yarn rope scaling needs 'original_max_position_embeddings'");
      s.type = RopeScalingType::kYarn;
      s.factor = *factor;
    }
  } else if (t == "llama3") {
    s.type = RopeScalingType::kLlama3;
    s.factor = factor.value_or(8.0);
    CERA_ASSIGN_OR_RETURN(const auto lo, r.optional_number(*params, "low_freq_factor"));
    CERA_ASSIGN_OR_RETURN(const auto hi, r.optional_number(*params, "high_freq_factor"));
    s.low_freq_factor = lo.value_or(1.0);
    s.high_freq_factor = hi.value_or(4.0);
    if (!s.original_context) s.original_context = 8192;
  } else {
    return unsupported(r.where() + ": rope type '" + t + "' (supported: default, linear, yarn, llama3)");
  }
  return {};
}

// lfm2 / lfm2moe layer kinds and L_cache; lfm2's FFN width adjustment (llama.cpp's
// LFM2Model._add_feed_forward_length: 2/3 of intermediate_size, times the multiplier, rounded
// up to block_multiple_of) when block_auto_adjust_ff_dim is set. lfm2moe uses intermediate_size.
Status read_lfm2(const JsonValue& j, const Reader& r, HfConfig& c) {
  const JsonValue* types = j.find("layer_types");
  if (!types || !types->is_array() || types->size() != c.n_layer) {
    return invalid_argument(r.where() + ": 'layer_types' must list " + std::to_string(c.n_layer) + " layer kinds");
  }
  for (const JsonValue& t : *types->as_array()) {
    const std::string kind = t.as_string() ? *t.as_string() : "";
    if (kind != "conv" && kind != "full_attention") {
      return unsupported(r.where() + ": layer type '" + kind + "' (supported: conv, full_attention)");
    }
    c.conv_layers.push_back(kind == "conv");
  }
  CERA_ASSIGN_OR_RETURN(c.conv_l_cache, r.required_u32("conv_L_cache"));
  if (const JsonValue* bias = j.find("conv_bias"); bias && bias->as_bool() && *bias->as_bool()) {
    return unsupported(r.where() + ": conv_bias true (no lfm2 checkpoint has convolution biases)");
  }
  if (c.arch != HfArch::kLfm2) return {};
  const JsonValue* adjust = j.find("block_auto_adjust_ff_dim");
  if (adjust && adjust->as_bool() && *adjust->as_bool()) {
    CERA_ASSIGN_OR_RETURN(const auto ff_dim, r.optional_u32("block_ff_dim"));
    CERA_ASSIGN_OR_RETURN(const auto multiplier, r.optional_number(j, "block_ffn_dim_multiplier"));
    CERA_ASSIGN_OR_RETURN(const uint32_t multiple_of, r.required_u32("block_multiple_of"));
    int64_t ff = ff_dim.value_or(c.n_ff);
    ff = 2 * ff / 3;
    if (multiplier) ff = static_cast<int64_t>(*multiplier * static_cast<double>(ff));
    c.n_ff = static_cast<uint32_t>(multiple_of * ((ff + multiple_of - 1) / multiple_of));
  }
  return {};
}

// bert: what src/model/bert.cpp computes is fixed (absolute learned positions, GELU with erf);
// a checkpoint that asks for anything else is refused rather than converted into wrong outputs.
Status read_bert(const JsonValue& j, const Reader& r, HfConfig& c) {
  if (!c.n_ctx) return not_found(r.where() + ": missing key 'max_position_embeddings' (bert learns one embedding per position)");
  CERA_ASSIGN_OR_RETURN(const auto types, r.optional_u32("type_vocab_size"));
  c.n_token_types = types.value_or(2);  // transformers' BertConfig default
  const JsonValue* act = j.find("hidden_act");
  const std::string a = act && act->as_string() ? *act->as_string() : "gelu";
  if (a != "gelu") {
    return unsupported(r.where() + ": 'hidden_act' is '" + a + "'; cera's bert uses the exact (erf) GELU, 'gelu'");
  }
  const JsonValue* pos = j.find("position_embedding_type");
  const std::string p = pos && pos->as_string() ? *pos->as_string() : "absolute";
  if (p != "absolute") {
    return unsupported(r.where() + ": 'position_embedding_type' is '" + p + "'; cera's bert supports 'absolute' only");
  }
  if (c.n_head_kv && *c.n_head_kv != c.n_head) {
    return unsupported(r.where() + ": 'num_key_value_heads' differs from 'num_attention_heads' (bert has no grouped KV heads)");
  }
  return {};
}

Status read_moe(const JsonValue& j, const Reader& r, HfConfig& c) {
  CERA_ASSIGN_OR_RETURN(const auto n_expert, r.optional_u32("num_experts"));
  CERA_ASSIGN_OR_RETURN(const auto n_local, r.optional_u32("num_local_experts"));
  if (!n_expert && !n_local) return not_found(r.where() + ": missing key 'num_experts'");
  c.n_expert = n_expert ? *n_expert : *n_local;
  CERA_ASSIGN_OR_RETURN(c.n_expert_used, r.required_u32("num_experts_per_tok"));
  CERA_ASSIGN_OR_RETURN(c.n_ff_exp, r.required_u32("moe_intermediate_size"));
  if (c.n_expert_used > c.n_expert) return invalid_argument(r.where() + ": num_experts_per_tok exceeds num_experts");
  if (const JsonValue* v = j.find("norm_topk_prob"); v && v->as_bool()) c.norm_topk_prob = *v->as_bool();
  CERA_ASSIGN_OR_RETURN(const auto scaling, r.optional_number(j, "routed_scaling_factor"));
  if (scaling && *scaling != 1.0) return unsupported(r.where() + ": routed_scaling_factor " + std::to_string(*scaling));
  if (c.arch == HfArch::kLfm2Moe) {
    const JsonValue* dense = j.find("num_dense_layers");
    c.n_dense_lead = dense && dense->as_int() ? static_cast<uint32_t>(*dense->as_int()) : 0;
    const JsonValue* bias = j.find("use_expert_bias");
    c.expert_bias = !bias || !bias->as_bool() || *bias->as_bool();  // transformers' default: true
    if (c.n_dense_lead > c.n_layer) return invalid_argument(r.where() + ": num_dense_layers exceeds num_hidden_layers");
  } else {
    // qwen3moe: every layer sparse (decoder_sparse_step 1, no mlp_only_layers), as llama.cpp assumes.
    const JsonValue* step = j.find("decoder_sparse_step");
    const JsonValue* only = j.find("mlp_only_layers");
    if ((step && step->as_int() && *step->as_int() != 1) || (only && only->is_array() && only->size() != 0)) {
      return unsupported(r.where() + ": dense layers between qwen3moe expert layers (decoder_sparse_step / mlp_only_layers)");
    }
  }
  return {};
}

}  // namespace

const HfArchInfo& arch_info(HfArch arch) {
  for (const HfArchInfo& a : kArchTable) {
    if (a.arch == arch) return a;
  }
  return kArchTable[0];
}

Result<HfConfig> parse_hf_config(const JsonValue& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": not a JSON object");
  const JsonValue* archs = j.find("architectures");
  if (!archs || !archs->is_array() || archs->size() == 0 || !(*archs->as_array())[0].as_string()) {
    return not_found(where + ": missing key 'architectures' (a list of class names)");
  }
  const std::string& name = *(*archs->as_array())[0].as_string();
  HfConfig c;
  bool known = false;
  for (const HfArchInfo& a : kArchTable) {
    if (name == a.hf_name) {
      c.arch = a.arch;
      known = true;
    }
  }
  if (!known) {
    std::string list;
    for (const HfArchInfo& a : kArchTable) list += std::string(list.empty() ? "" : ", ") + a.hf_name;
    return unsupported(where + ": architecture '" + name + "' (supported: " + list + ")");
  }
  const Reader r(j, where);
  CERA_ASSIGN_OR_RETURN(c.n_embd, r.required_u32("hidden_size"));
  CERA_ASSIGN_OR_RETURN(c.n_layer, r.required_u32("num_hidden_layers"));
  CERA_ASSIGN_OR_RETURN(c.n_head, r.required_u32("num_attention_heads"));
  CERA_ASSIGN_OR_RETURN(c.n_head_kv, r.optional_u32("num_key_value_heads"));
  CERA_ASSIGN_OR_RETURN(c.n_ff, r.required_u32("intermediate_size"));
  CERA_ASSIGN_OR_RETURN(c.n_vocab, r.required_u32("vocab_size"));
  CERA_ASSIGN_OR_RETURN(c.n_ctx, r.optional_u32("max_position_embeddings"));
  // llama.cpp's Granite converter drops head_dim with a warning; the model uses n_embd / n_head.
  if (c.arch != HfArch::kGranite) {
    CERA_ASSIGN_OR_RETURN(c.explicit_head_dim, r.optional_u32("head_dim"));
  }
  const bool lfm2_family = c.arch == HfArch::kLfm2 || c.arch == HfArch::kLfm2Moe;
  const char* eps_key = lfm2_family ? "norm_eps" : c.arch == HfArch::kBert ? "layer_norm_eps" : "rms_norm_eps";
  CERA_ASSIGN_OR_RETURN(const auto eps, r.optional_number(j, eps_key));
  if (!eps) return not_found(where + ": missing key '" + eps_key + "'");
  c.rms_eps = *eps;
  CERA_RETURN_IF_ERROR(read_rope(j, r, c));
  if (const JsonValue* tie = j.find("tie_word_embeddings"); tie && tie->as_bool()) c.tie_word_embeddings = *tie->as_bool();
  if (c.arch == HfArch::kGranite) {
    CERA_ASSIGN_OR_RETURN(c.embedding_multiplier, r.optional_number(j, "embedding_multiplier"));
    CERA_ASSIGN_OR_RETURN(c.attention_multiplier, r.optional_number(j, "attention_multiplier"));
    CERA_ASSIGN_OR_RETURN(c.residual_multiplier, r.optional_number(j, "residual_multiplier"));
    CERA_ASSIGN_OR_RETURN(c.logits_scaling, r.optional_number(j, "logits_scaling"));
  }
  if (lfm2_family) CERA_RETURN_IF_ERROR(read_lfm2(j, r, c));
  if (c.arch == HfArch::kBert) CERA_RETURN_IF_ERROR(read_bert(j, r, c));
  if (c.arch == HfArch::kLfm2Moe || c.arch == HfArch::kQwen3Moe) CERA_RETURN_IF_ERROR(read_moe(j, r, c));
  c.bos_token_id = r.optional_int("bos_token_id");
  c.eos_token_id = r.optional_int("eos_token_id");
  c.pad_token_id = r.optional_int("pad_token_id");

  if (!c.explicit_head_dim && c.n_embd % c.n_head != 0) {
    return invalid_argument(where + ": hidden_size " + std::to_string(c.n_embd) +
                            " is not divisible by num_attention_heads " + std::to_string(c.n_head));
  }
  if (c.n_head % c.head_count_kv() != 0) {
    return invalid_argument(where + ": num_attention_heads " + std::to_string(c.n_head) +
                            " is not divisible by num_key_value_heads " + std::to_string(c.head_count_kv()));
  }
  // Rotary halves need an even head dimension; bert has no rotary embedding.
  if (c.arch != HfArch::kBert && c.head_dim() % 2 != 0) return invalid_argument(where + ": head dimension " + std::to_string(c.head_dim()) + " is odd");
  return c;
}

Result<HfConfig> read_hf_config(const std::filesystem::path& dir) {
  const std::string path = (dir / "config.json").string();
  CERA_ASSIGN_OR_RETURN(JsonValue j, format::read_json_file(path));
  return parse_hf_config(j, path);
}

std::vector<float> llama3_rope_factors(const HfConfig& c) {
  // Mirrors llama.cpp: inverse frequencies in float32, wavelengths compared against the
  // original context divided by the low/high frequency factors, smooth blend in between.
  const RopeScaling& s = c.rope_scaling;
  const float base = static_cast<float>(c.rope_theta.value_or(10000.0));
  const uint32_t dim = c.head_dim();
  const float factor = static_cast<float>(s.factor), lo = static_cast<float>(s.low_freq_factor);
  const float hi = static_cast<float>(s.high_freq_factor);
  const float old_ctx = static_cast<float>(s.original_context.value_or(8192));
  const double low_wavelen = static_cast<double>(old_ctx) / lo, high_wavelen = static_cast<double>(old_ctx) / hi;
  std::vector<float> out;
  for (uint32_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = static_cast<float>(2 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

}  // namespace cera::convert
