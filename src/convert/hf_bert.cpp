// HF -> GGUF for the BERT encoder (BertModel, as sentence-transformers folders ship it), with
// llama.cpp's names (convert_hf_to_gguf.py's BertModel) and the sentence-transformers modules
// turned into metadata: the Pooling module's mode as bert.pooling_type, a Normalize module as
// cera.embedding.normalize. Decision: a module cera cannot reproduce (Dense, max pooling, ...)
// refuses the conversion, since a file that loads but embeds differently would go unnoticed.
#include <string>

#include "convert/hf_plan.h"
#include "format/json.h"

namespace cera::convert {
namespace {

using format::JsonValue;

// llama.cpp's pooling numbering (llama_pooling_type), the values `bert.pooling_type` holds.
enum class Pooling : uint32_t { kNone = 0, kMean = 1, kCls = 2, kLast = 3 };

struct PoolingMode {
  const char* key;  // 1_Pooling/config.json flag
  Pooling pooling;
};
constexpr PoolingMode kPoolingModes[] = {
    {"pooling_mode_mean_tokens", Pooling::kMean},
    {"pooling_mode_cls_token", Pooling::kCls},
    {"pooling_mode_lasttoken", Pooling::kLast},
};

// A LayerNorm's weight and bias; checkpoints saved by old TensorFlow ports call them gamma/beta.
Status take_layer_norm(PlanBuilder& b, const std::string& hf, const std::string& gguf, uint64_t n) {
  const bool old_names = !b.has(hf + ".weight") && b.has(hf + ".gamma");
  CERA_RETURN_IF_ERROR(b.take(hf + (old_names ? ".gamma" : ".weight"), gguf + ".weight", {n}, false));
  return b.take(hf + (old_names ? ".beta" : ".bias"), gguf + ".bias", {n}, false);
}

// A biased projection [n_out, n_in] (HF order) and its [n_out] bias.
Status take_linear(PlanBuilder& b, const std::string& hf, const std::string& gguf, uint64_t n_out, uint64_t n_in) {
  CERA_RETURN_IF_ERROR(b.take(hf + ".weight", gguf + ".weight", {n_out, n_in}, false));
  return b.take(hf + ".bias", gguf + ".bias", {n_out}, false);
}

// The pooling mode of a sentence-transformers Pooling module folder: exactly one supported
// flag true, every other pooling_mode_* flag false.
Result<Pooling> read_pooling(const std::filesystem::path& path, const HfConfig& c) {
  const std::string where = path.string();
  CERA_ASSIGN_OR_RETURN(const JsonValue j, format::read_json_file(where));
  if (!j.is_object()) return invalid_argument(where + ": not a JSON object");
  if (const JsonValue* dim = j.find("word_embedding_dimension"); dim && dim->as_int() && *dim->as_int() != c.n_embd) {
    return invalid_argument(where + ": 'word_embedding_dimension' is " + std::to_string(*dim->as_int()) +
                            " but config.json's hidden_size is " + std::to_string(c.n_embd));
  }
  std::optional<PoolingMode> chosen;
  for (const auto& [key, value] : *j.as_object()) {
    if (key.rfind("pooling_mode_", 0) != 0 || !value.as_bool().value_or(false)) continue;
    std::optional<PoolingMode> mode;
    for (const PoolingMode& m : kPoolingModes) {
      if (key == m.key) mode = m;
    }
    if (!mode) {
      return unsupported(where + ": '" + key + "' is true; cera pools by mean, cls or last token only "
                         "(pooling_mode_mean_tokens, pooling_mode_cls_token or pooling_mode_lasttoken)");
    }
    if (chosen) {
      return unsupported(where + ": both '" + std::string(chosen->key) + "' and '" + key +
                         "' are true; cera pools with one mode (their outputs would be concatenated)");
    }
    chosen = mode;
  }
  if (!chosen) {
    return invalid_argument(where + ": no pooling mode is true (set one of pooling_mode_mean_tokens, "
                            "pooling_mode_cls_token, pooling_mode_lasttoken)");
  }
  return chosen->pooling;
}

}  // namespace

Status plan_bert(PlanBuilder& b, const HfConfig& c, std::vector<std::string>& notes) {
  // BertModel saves its tensors bare; the task heads' checkpoints (BertForMaskedLM, ...) nest them under "bert.".
  const std::string root = b.has("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  const uint64_t e = c.n_embd;
  const std::string emb = root + "embeddings.";
  CERA_RETURN_IF_ERROR(b.take(emb + "word_embeddings.weight", "token_embd.weight", {c.n_vocab, e}, false));
  CERA_RETURN_IF_ERROR(b.take(emb + "position_embeddings.weight", "position_embd.weight", {*c.n_ctx, e}, false));
  CERA_RETURN_IF_ERROR(b.take(emb + "token_type_embeddings.weight", "token_types.weight", {c.n_token_types, e}, false));
  CERA_RETURN_IF_ERROR(take_layer_norm(b, emb + "LayerNorm", "token_embd_norm", e));
  // A buffer holding 0..max_position_embeddings-1: the positions the runtime passes anyway.
  if (b.has(emb + "position_ids")) b.mark_used(emb + "position_ids");
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    const std::string hf = root + "encoder.layer." + std::to_string(l) + ".", gg = "blk." + std::to_string(l) + ".";
    CERA_RETURN_IF_ERROR(take_linear(b, hf + "attention.self.query", gg + "attn_q", e, e));
    CERA_RETURN_IF_ERROR(take_linear(b, hf + "attention.self.key", gg + "attn_k", e, e));
    CERA_RETURN_IF_ERROR(take_linear(b, hf + "attention.self.value", gg + "attn_v", e, e));
    CERA_RETURN_IF_ERROR(take_linear(b, hf + "attention.output.dense", gg + "attn_output", e, e));
    CERA_RETURN_IF_ERROR(take_layer_norm(b, hf + "attention.output.LayerNorm", gg + "attn_output_norm", e));
    CERA_RETURN_IF_ERROR(take_linear(b, hf + "intermediate.dense", gg + "ffn_up", c.n_ff, e));
    CERA_RETURN_IF_ERROR(take_linear(b, hf + "output.dense", gg + "ffn_down", e, c.n_ff));
    CERA_RETURN_IF_ERROR(take_layer_norm(b, hf + "output.LayerNorm", gg + "layer_output_norm", e));
  }
  // BertModel's pooler (tanh(dense([CLS]))) feeds next-sentence prediction; sentence-transformers
  // pools the last hidden states itself and never reads pooler_output, and llama.cpp drops it too.
  bool pooler = false;
  for (const char* name : {"pooler.dense.weight", "pooler.dense.bias"}) {
    if (!b.has(root + name)) continue;
    b.mark_used(root + name);
    pooler = true;
  }
  if (pooler) notes.push_back("pooler.dense not written: sentence embeddings pool the last hidden states, not BERT's pooler");
  return {};
}

Status write_bert_metadata(const std::filesystem::path& dir, const HfConfig& c, format::GgufWriter& w,
                           std::vector<std::string>& notes) {
  const std::string p = std::string(arch_info(c.arch).gguf_name) + ".";
  w.set_bool(p + "attention.causal", false);
  w.set_u32("tokenizer.ggml.token_type_count", c.n_token_types);  // llama.cpp's check on token_types
  const auto modules_path = dir / "modules.json";
  if (!std::filesystem::exists(modules_path)) {
    // Not a sentence-transformers folder: no pooling defined, the file gives hidden states.
    notes.push_back("no modules.json: " + p + "pooling_type not written and no normalisation");
    w.set_bool("cera.embedding.normalize", false);
    return {};
  }
  const std::string where = modules_path.string();
  CERA_ASSIGN_OR_RETURN(const JsonValue modules, format::read_json_file(where));
  if (!modules.is_array()) return invalid_argument(where + ": expected a list of modules");
  std::optional<Pooling> pooling;
  bool normalize = false;
  for (const JsonValue& m : *modules.as_array()) {
    const JsonValue* type = m.find("type");
    const JsonValue* path = m.find("path");
    if (!type || !type->as_string()) return invalid_argument(where + ": a module has no string 'type'");
    const std::string& t = *type->as_string();
    if (t == "sentence_transformers.models.Transformer") continue;  // the encoder: config.json here
    if (t == "sentence_transformers.models.Normalize") {
      normalize = true;
      continue;
    }
    if (t == "sentence_transformers.models.Pooling") {
      if (!path || !path->as_string()) return invalid_argument(where + ": the Pooling module has no string 'path'");
      if (pooling) return unsupported(where + ": more than one Pooling module");
      CERA_ASSIGN_OR_RETURN(pooling, read_pooling(dir / *path->as_string() / "config.json", c));
      continue;
    }
    return unsupported(where + ": module type '" + t + "' (cera reproduces Transformer, Pooling and Normalize only; "
                       "a checkpoint with other modules would embed differently)");
  }
  if (!pooling) return not_found(where + ": no sentence_transformers.models.Pooling module");
  w.set_u32(p + "pooling_type", static_cast<uint32_t>(*pooling));
  w.set_bool("cera.embedding.normalize", normalize);
  return {};
}

}  // namespace cera::convert
