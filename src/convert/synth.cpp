// Synthetic llama models. Normals come from the Irwin-Hall sum of four 16-bit uniforms cut from
// one 64-bit splitmix draw: one cheap hash per weight instead of a log/sqrt/cos, which keeps an
// 8B model's 8e9 weights generation-bound at a few ns each; the tails stop at 3.46 sigma, which
// benchmarks do not care about.
#include "convert/synth.h"

#include <cmath>

#include "format/gguf_writer.h"
#include "convert/quantize.h"
#include "format/gguf.h"

namespace cera::convert {
namespace {

constexpr SynthShape kShapes[] = {
    // name        n_embd layers heads kv  n_ff   tied   n_ctx    rope_theta
    {"tiny", 256, 2, 4, 2, 512, false, 2048, 10000.0f},
    {"llama-1b", 2048, 16, 32, 8, 8192, true, 131072, 500000.0f},  // Llama 3.2 1B
    {"llama-8b", 4096, 32, 32, 8, 14336, false, 131072, 500000.0f},  // Llama 3 8B
};
constexpr uint32_t kPlaceholderVocab = 32000;  // PERFORMANCE.md's benchmark vocabulary
constexpr float kWeightScale = 0.02f;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A SentencePiece-style vocabulary llama.cpp can load: <unk> <s> </s>, 256 byte pieces, then
// filler pieces.
void placeholder_vocab(format::GgufWriter& w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  while (tokens.size() < kPlaceholderVocab) {
    tokens.push_back("\xE2\x96\x81t" + std::to_string(tokens.size()));
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = types[i] == 1 ? -static_cast<float>(i) : 0.0f;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_array("tokenizer.ggml.tokens", format::GgufArray::of_strings(std::move(tokens)));
  w.set_array("tokenizer.ggml.scores", format::GgufArray::of<float>(scores));
  w.set_array("tokenizer.ggml.token_type", format::GgufArray::of<int32_t>(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
}

Result<uint32_t> copy_vocab(const std::filesystem::path& from, format::GgufWriter& w) {
  CERA_ASSIGN_OR_RETURN(const format::GgufFile f, format::GgufFile::open(from));
  const format::GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->array()) return not_found(from.string() + ": no tokenizer.ggml.tokens array to copy");
  for (const format::GgufKv& kv : f.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);
  }
  return static_cast<uint32_t>(tokens->array()->size());
}

}  // namespace

const SynthShape* find_synth_shape(const std::string& name) {
  for (const SynthShape& s : kShapes) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

std::vector<std::string> synth_shape_names() {
  std::vector<std::string> out;
  for (const SynthShape& s : kShapes) out.push_back(s.name);
  return out;
}

std::optional<SynthArch> synth_arch_from_name(const std::string& name) {
  if (name == "llama") return SynthArch::kLlama;
  return std::nullopt;
}

void synth_row(uint64_t seed, uint64_t tensor, uint64_t row, float scale, float* out, uint64_t n) {
  uint64_t key = seed ^ (0xD1B54A32D192ED03ull * (tensor + 1));
  uint64_t state = splitmix64(key) ^ (row * 0x9E3779B97F4A7C15ull);
  const float k = scale * std::sqrt(3.0f) / 65536.0f;  // Irwin-Hall(4) has variance 1/3
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(state);
    const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    out[i] = (sum - 2.0f * 65535.0f) * k;
  }
}

Result<SynthReport> synth_model(const SynthRequest& req, const format::WriteProgress& progress) {
  const SynthShape* s = find_synth_shape(req.shape);
  if (!s) {
    std::string list;
    for (const std::string& n : synth_shape_names()) list += (list.empty() ? "" : ", ") + n;
    return invalid_argument("unknown shape '" + req.shape + "' (known: " + list + ")");
  }
  if (!is_output_type(req.type)) return invalid_argument("type " + std::string(dtype_name(req.type)) + " cannot be written");
  format::GgufWriter w;
  SynthReport report;
  const std::string p = "llama.";
  w.set_string("general.architecture", "llama");
  w.set_string("general.type", "model");
  w.set_string("general.name", std::string("cera synth ") + s->name + " " + std::string(dtype_name(req.type)));
  w.set_u32(p + "block_count", s->n_layer);
  w.set_u32(p + "context_length", s->n_ctx);
  w.set_u32(p + "embedding_length", s->n_embd);
  w.set_u32(p + "feed_forward_length", s->n_ff);
  w.set_u32(p + "attention.head_count", s->n_head);
  w.set_u32(p + "attention.head_count_kv", s->n_head_kv);
  w.set_f32(p + "rope.freq_base", s->rope_theta);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32("general.file_type", llama_file_type(req.type));
  if (req.vocab_from.empty()) {
    placeholder_vocab(w);
    report.n_vocab = kPlaceholderVocab;
  } else {
    CERA_ASSIGN_OR_RETURN(report.n_vocab, copy_vocab(req.vocab_from, w));
  }
  w.set_u32(p + "vocab_size", report.n_vocab);
  w.set_u32(p + "rope.dimension_count", s->n_embd / s->n_head);

  const uint64_t e = s->n_embd, hd = s->n_embd / s->n_head, kv = hd * s->n_head_kv, ff = s->n_ff;
  struct Entry {
    std::string name;
    std::vector<uint64_t> shape;  // GGUF order
  };
  std::vector<Entry> entries = {{"token_embd.weight", {e, report.n_vocab}}};
  for (uint32_t l = 0; l < s->n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (Entry x : std::vector<Entry>{{"attn_norm.weight", {e}}, {"attn_q.weight", {e, e}}, {"attn_k.weight", {e, kv}},
                                      {"attn_v.weight", {e, kv}}, {"attn_output.weight", {e, e}}, {"ffn_norm.weight", {e}},
                                      {"ffn_gate.weight", {e, ff}}, {"ffn_up.weight", {e, ff}}, {"ffn_down.weight", {ff, e}}}) {
      entries.push_back({b + x.name, x.shape});
    }
  }
  entries.push_back({"output_norm.weight", {e}});
  if (!s->tied_output) entries.push_back({"output.weight", {e, report.n_vocab}});

  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& x = entries[i];
    const TypeChoice choice = choose_tensor_type(req.type, x.name, x.shape);
    if (choice.fallback) report.notes.push_back(x.name + ": " + *choice.fallback);
    uint64_t n = 1;
    for (uint64_t d : x.shape) n *= d;
    report.n_params += n;
    report.n_bytes += *format::tensor_bytes(choice.dtype, x.shape);
    const bool is_norm = x.shape.size() == 1;
    const uint64_t cols = x.shape[0], rows = n / cols, seed = req.seed;
    const DType dtype = choice.dtype;
    const int threads = req.n_threads;
    CERA_RETURN_IF_ERROR(w.add_tensor_fill({x.name, dtype, x.shape}, [=](std::span<std::byte> out) {
      return quantize_tensor({dtype, cols, rows, [=](uint64_t r, float* row) {
                                if (is_norm) {
                                  std::fill(row, row + cols, 1.0f);  // RMSNorm weights of a fresh model
                                } else {
                                  synth_row(seed, i, r, kWeightScale, row, cols);
                                }
                              }, threads}, out);
    }));
  }
  CERA_RETURN_IF_ERROR(w.write(req.output, progress));
  return report;
}

}  // namespace cera::convert
