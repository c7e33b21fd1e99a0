// libFuzzer target for the tokenizer: encodes the input with and without special-token parsing
// (and with BOS/EOS), decodes in one go and token by token through StreamDecoder, and traps if
// the two decodings differ or if decode(encode(s)) != s where that must hold. The vocabulary
// comes from $CERA_FUZZ_VOCAB, default ../shared/tokenizer-fixtures/ggml-vocab-llama-spm.gguf.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode/unicode.h"

namespace {

using cera::tokenizer::DecodeOptions;
using cera::tokenizer::EncodeOptions;
using cera::tokenizer::ModelKind;
using cera::tokenizer::StreamDecoder;
using cera::tokenizer::Tokenizer;

std::string default_vocab_path() {
  constexpr const char* kRelative = "shared/tokenizer-fixtures/ggml-vocab-llama-spm.gguf";
#ifdef CERA_SOURCE_DIR
  return std::string(CERA_SOURCE_DIR) + "/../" + kRelative;
#else
  return std::string("../") + kRelative;
#endif
}

const Tokenizer& tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    const char* env = std::getenv("CERA_FUZZ_VOCAB");
    const std::string path = env != nullptr && *env != '\0' ? env : default_vocab_path();
    auto file = cera::format::GgufFile::open(path);
    if (!file.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path.c_str(), file.status().to_string().c_str());
      std::abort();
    }
    auto t = Tokenizer::from_gguf(*file);
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path.c_str(), t.status().to_string().c_str());
      std::abort();
    }
    return std::make_unique<Tokenizer>(std::move(t).value());
  }();
  return *tok;
}

bool valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    if (cera::tokenizer::unicode::decode_utf8(s, pos) == cera::tokenizer::unicode::kReplacementChar &&
        pos - start == 1) {
      return false;
    }
  }
  return true;
}

void check_stream_matches(const Tokenizer& tok, const std::vector<int32_t>& ids, const DecodeOptions& opts) {
  const std::string whole = tok.decode(ids, opts);
  StreamDecoder stream(tok, opts);
  std::string pieces;
  for (int32_t id : ids) stream.push(id, pieces);
  stream.finish(pieces);
  if (pieces != whole) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  for (const bool parse_special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, EncodeOptions{.parse_special = parse_special});
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
    }
    check_stream_matches(tok, ids, DecodeOptions{});
    check_stream_matches(tok, ids, DecodeOptions{.render_special = true});
    // Lossless unless the input spells SentencePiece's space marker itself, or the model is
    // WordPiece (which normalizes case, accents and spacing by design). Byte-level BPE
    // vocabularies may lack (gpt-neox) or reuse as added tokens (deepseek-coder) the 13 bytes
    // that never occur in valid UTF-8, so BPE is held to it for valid UTF-8 only.
    const bool lossless = tok.kind() != ModelKind::kWordPiece &&
                          text.find("\xE2\x96\x81") == std::string_view::npos &&
                          (tok.kind() != ModelKind::kBpe || valid_utf8(text));
    if (lossless) {
      const std::string back = tok.decode(ids, DecodeOptions{.render_special = parse_special});
      if (back != text) __builtin_trap();
    }
  }
  const std::vector<int32_t> with_bos =
      tok.encode(text, EncodeOptions{.add_special = true, .parse_special = true});
  check_stream_matches(tok, with_bos, DecodeOptions{});
  return 0;
}
