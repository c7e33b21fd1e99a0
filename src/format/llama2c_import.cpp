// Reads a llama2.c checkpoint by walking its fp32 tensors in the fixed order of llama2.c's
// memory_map_weights(); every size is checked against the file before a view is taken.
#include "format/llama2c_import.h"

#include <cstring>

#include "core/mapped_file.h"
#include "core/output_file.h"

namespace cera::format {
namespace {

// llama2.c token types mapped to GGUF's tokenizer.ggml.token_type values.
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };

Result<Llama2cConfig> read_config(std::span<const std::byte> bytes, const std::string& where) {
  int32_t h[7];
  if (bytes.size() < sizeof(h)) return corrupt(where + ": file is shorter than the 28-byte header");
  std::memcpy(h, bytes.data(), sizeof(h));
  Llama2cConfig c{h[0], h[1], h[2], h[3], h[4], h[5] < 0 ? -h[5] : h[5], h[6], h[5] > 0};
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  const int32_t values[] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len};
  for (int i = 0; i < 7; ++i) {
    if (values[i] <= 0 || values[i] > (1 << 24)) {
      return corrupt(where + ": header field " + names[i] + " is " + std::to_string(values[i]) +
                     ", expected 1.." + std::to_string(1 << 24));
    }
  }
  if (c.dim % c.n_heads != 0) {
    return corrupt(where + ": dim " + std::to_string(c.dim) + " is not divisible by n_heads " +
                   std::to_string(c.n_heads));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return corrupt(where + ": n_heads " + std::to_string(c.n_heads) +
                   " is not divisible by n_kv_heads " + std::to_string(c.n_kv_heads));
  }
  return c;
}

struct Token {
  std::string text;
  float score;
  TokenType type;
};

bool is_byte_piece(const std::string& s) {
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
         std::isxdigit(static_cast<unsigned char>(s[4]));
}

Result<std::vector<Token>> read_tokenizer(const std::filesystem::path& path, int32_t vocab_size) {
  auto map = MappedFile::open(path);
  if (!map.ok()) return map.status();
  std::span<const std::byte> b = map->bytes();
  const std::string where = path.string();
  size_t pos = 4;  // skip max_token_length
  if (b.size() < pos) return corrupt(where + ": file is shorter than its 4-byte header");
  std::vector<Token> tokens;
  tokens.reserve(vocab_size);
  for (int32_t i = 0; i < vocab_size; ++i) {
    float score;
    int32_t len;
    if (b.size() - pos < 8) {
      return corrupt(where + ": ends at token " + std::to_string(i) + " of " + std::to_string(vocab_size));
    }
    std::memcpy(&score, b.data() + pos, 4);
    std::memcpy(&len, b.data() + pos + 4, 4);
    pos += 8;
    if (len < 0 || static_cast<size_t>(len) > b.size() - pos) {
      return corrupt(where + ": token " + std::to_string(i) + " has length " + std::to_string(len) +
                     " past the end of the file");
    }
    std::string raw(reinterpret_cast<const char*>(b.data() + pos), len);
    pos += len;
    Token t{{}, score, TokenType::kNormal};
    if (i == 0) {
      t = {"<unk>", score, TokenType::kUnknown};
    } else if (raw == "\n<s>\n" || raw == "\n</s>\n") {  // llama2.c's BOS/EOS spelling
      t = {raw.substr(1, raw.size() - 2), score, TokenType::kControl};
    } else if (is_byte_piece(raw)) {
      t = {raw, score, TokenType::kByte};
    } else {
      // llama2.c stores SentencePiece's U+2581 as a plain space.
      for (char c : raw) {
        if (c == ' ') t.text += "\xE2\x96\x81";
        else t.text += c;
      }
    }
    tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace

Status convert_llama2c(const Llama2cConvert& request, const WriteProgress& progress) {
  const std::filesystem::path inputs[] = {request.checkpoint, request.tokenizer};
  CERA_RETURN_IF_ERROR(check_output_path(request.output, inputs));  // before any work
  auto map = MappedFile::open(request.checkpoint);
  if (!map.ok()) return map.status();
  const std::string where = request.checkpoint.string();
  CERA_ASSIGN_OR_RETURN(const Llama2cConfig c, read_config(map->bytes(), where));
  CERA_ASSIGN_OR_RETURN(std::vector<Token> tokens, read_tokenizer(request.tokenizer, c.vocab_size));

  const uint64_t dim = c.dim, hidden = c.hidden_dim, layers = c.n_layers, vocab = c.vocab_size;
  const uint64_t head_size = dim / c.n_heads, kv_dim = head_size * c.n_kv_heads;
  // Expected file size: header, weights in order, two legacy RoPE tables, optional classifier.
  const uint64_t floats = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden) +
                          dim + uint64_t(c.seq_len) * head_size + (c.shared_classifier ? 0 : vocab * dim);
  if (map->size() != 28 + floats * 4) {
    return corrupt(where + ": file is " + std::to_string(map->size()) + " bytes, but its header implies " +
                   std::to_string(28 + floats * 4));
  }

  GgufWriter w;
  const std::string name = request.name.empty() ? request.checkpoint.stem().string() : request.name;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", name);
  w.set_u32("general.file_type", 0);  // all F32
  w.set_u32("llama.context_length", c.seq_len);
  w.set_u32("llama.embedding_length", c.dim);
  w.set_u32("llama.block_count", c.n_layers);
  w.set_u32("llama.feed_forward_length", c.hidden_dim);
  w.set_u32("llama.attention.head_count", c.n_heads);
  w.set_u32("llama.attention.head_count_kv", c.n_kv_heads);
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(head_size));
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u32("llama.vocab_size", c.vocab_size);

  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (Token& t : tokens) {
    texts.push_back(std::move(t.text));
    scores.push_back(t.score);
    types.push_back(static_cast<int32_t>(t.type));
  }
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_array("tokenizer.ggml.tokens", GgufArray::of_strings(std::move(texts)));
  w.set_array("tokenizer.ggml.scores", GgufArray::of<float>(scores));
  w.set_array("tokenizer.ggml.token_type", GgufArray::of<int32_t>(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);

  // Walk the checkpoint in llama2.c's order (each tensor type for all layers), then emit tensors
  // block by block as GGUF converters do. A llama2.c tensor is row-major [rows][cols], i.e. GGUF
  // shape {cols, rows}.
  uint64_t pos = 28;
  auto take = [&](uint64_t n) {
    auto s = map->bytes().subspan(pos, n * 4);
    pos += n * 4;
    return s;
  };
  struct Group {
    const char* name;
    uint64_t cols, rows;
    std::span<const std::byte> all_layers;
  };
  const auto embedding = take(vocab * dim);
  std::vector<Group> groups = {{"attn_norm", dim, 1, {}},     {"attn_q", dim, dim, {}},
                               {"attn_k", dim, kv_dim, {}},   {"attn_v", dim, kv_dim, {}},
                               {"attn_output", dim, dim, {}}, {"ffn_norm", dim, 1, {}},
                               {"ffn_gate", dim, hidden, {}},  // w1
                               {"ffn_down", hidden, dim, {}},  // w2
                               {"ffn_up", dim, hidden, {}}};   // w3
  for (Group& g : groups) g.all_layers = take(layers * g.cols * g.rows);
  const auto output_norm = take(dim);
  take(uint64_t(c.seq_len) * head_size);  // legacy RoPE tables (real and imaginary halves)

  auto add = [&](const std::string& tensor, std::vector<uint64_t> shape, std::span<const std::byte> data) {
    return w.add_tensor_view({tensor, DType::kF32, std::move(shape)}, data);
  };
  CERA_RETURN_IF_ERROR(add("token_embd.weight", {dim, vocab}, embedding));
  for (uint64_t l = 0; l < layers; ++l) {
    for (const Group& g : groups) {
      const uint64_t n = g.cols * g.rows * 4;
      std::vector<uint64_t> shape = g.rows == 1 ? std::vector<uint64_t>{g.cols} : std::vector<uint64_t>{g.cols, g.rows};
      CERA_RETURN_IF_ERROR(add("blk." + std::to_string(l) + "." + g.name + ".weight", std::move(shape),
                               g.all_layers.subspan(l * n, n)));
    }
  }
  CERA_RETURN_IF_ERROR(add("output_norm.weight", {dim}, output_norm));
  if (!c.shared_classifier) CERA_RETURN_IF_ERROR(add("output.weight", {dim, vocab}, take(vocab * dim)));
  return w.write(request.output, progress, inputs);
}

}  // namespace cera::format
