// Synthetic models (tensor lists per architecture in synth_layout.cpp). Normals come from the Irwin-Hall sum of four 16-bit uniforms cut from
// one 64-bit splitmix draw: one cheap hash per weight instead of a log/sqrt/cos, which keeps an
// 8B model's 8e9 weights generation-bound at a few ns each; the tails stop at 3.46 sigma, which
// benchmarks do not care about.
#include "convert/synth.h"

#include <cmath>

#include "convert/quantize.h"
#include "convert/synth_layout.h"
#include "core/output_file.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"

namespace cera::convert {
namespace {

// lfm2-1.2b: LFM2-1.2B (attention at layers 2, 5, 8, 10, 12, 14; the FFN width after LFM2's
// adjustment). qwen3-30b-a3b: Qwen3-30B-A3B (head_dim 128 while n_embd / n_head is 64). The tiny
// shapes are the test versions of each generator.
constexpr SynthShape kShapes[] = {
    {.name = "tiny", .arch = SynthArch::kLlama, .n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
     .n_ff = 512, .tied_output = false, .n_ctx = 2048, .rope_theta = 10000.0f},
    {.name = "llama-1b", .arch = SynthArch::kLlama, .n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8,
     .n_ff = 8192, .tied_output = true, .n_ctx = 131072, .rope_theta = 500000.0f},  // Llama 3.2 1B
    {.name = "llama-8b", .arch = SynthArch::kLlama, .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 8,
     .n_ff = 14336, .tied_output = false, .n_ctx = 131072, .rope_theta = 500000.0f},  // Llama 3 8B
    {.name = "lfm2-tiny", .arch = SynthArch::kLfm2, .n_embd = 256, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
     .n_ff = 512, .tied_output = true, .n_ctx = 2048, .rope_theta = 1000000.0f, .n_vocab = 4096,
     .attention_layers = 0b1010, .l_cache = 3},
    {.name = "lfm2-1.2b", .arch = SynthArch::kLfm2, .n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8,
     .n_ff = 8192, .tied_output = true, .n_ctx = 128000, .rope_theta = 1000000.0f, .n_vocab = 65536,
     .attention_layers = (1u << 2) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 12) | (1u << 14), .l_cache = 3},
    {.name = "qwen3moe-tiny", .arch = SynthArch::kQwen3Moe, .n_embd = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
     .n_ff = 512, .tied_output = false, .n_ctx = 2048, .rope_theta = 1000000.0f, .head_dim = 128, .n_vocab = 4096,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256},
    {.name = "qwen3-30b-a3b", .arch = SynthArch::kQwen3Moe, .n_embd = 2048, .n_layer = 48, .n_head = 32,
     .n_head_kv = 4, .n_ff = 6144, .tied_output = false, .n_ctx = 40960, .rope_theta = 1000000.0f, .head_dim = 128,
     .n_vocab = 151936, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
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
// filler pieces up to n_vocab.
void placeholder_vocab(format::GgufWriter& w, uint32_t n_vocab) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  while (tokens.size() < n_vocab) {
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
  for (SynthArch a : {SynthArch::kLlama, SynthArch::kLfm2, SynthArch::kQwen3Moe}) {
    if (name == synth_arch_name(a)) return a;
  }
  return std::nullopt;
}

const char* synth_arch_name(SynthArch arch) {
  switch (arch) {
    case SynthArch::kLlama: return "llama";
    case SynthArch::kLfm2: return "lfm2";
    case SynthArch::kQwen3Moe: return "qwen3moe";
  }
  return "llama";
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
  if (req.arch && *req.arch != s->arch) {
    return invalid_argument("shape '" + req.shape + "' is a " + synth_arch_name(s->arch) + " shape, not " +
                            synth_arch_name(*req.arch));
  }
  if (!is_output_type(req.type)) return invalid_argument("type " + std::string(dtype_name(req.type)) + " cannot be written");
  std::vector<std::filesystem::path> inputs;
  if (!req.vocab_from.empty()) inputs.push_back(req.vocab_from);
  CERA_RETURN_IF_ERROR(check_output_path(req.output, inputs));  // before any work
  format::GgufWriter w;
  SynthReport report;
  const std::string arch = synth_arch_name(s->arch);
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "model");
  w.set_string("general.name", std::string("cera synth ") + s->name + " " + std::string(dtype_name(req.type)));
  w.set_u32("general.file_type", llama_file_type(req.type));
  if (req.vocab_from.empty()) {
    report.n_vocab = s->n_vocab != 0 ? s->n_vocab : kPlaceholderVocab;
    placeholder_vocab(w, report.n_vocab);
  } else {
    CERA_ASSIGN_OR_RETURN(report.n_vocab, copy_vocab(req.vocab_from, w));
  }
  const std::vector<SynthTensor> entries = synth_layout(*s, report.n_vocab, w);

  for (size_t i = 0; i < entries.size(); ++i) {
    const SynthTensor& x = entries[i];
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
  CERA_RETURN_IF_ERROR(w.write(req.output, progress, inputs));
  return report;
}

}  // namespace cera::convert
