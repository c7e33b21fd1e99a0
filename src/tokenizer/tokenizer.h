// The public tokenizer: built from a GGUF file's tokenizer.ggml.* metadata alone, it encodes
// text to ids and decodes ids to text for SPM ("llama"), byte-level BPE ("gpt2") and WordPiece
// ("bert") vocabularies. Immutable after loading and cheap to copy (shared state), so one
// instance serves any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"
#include "tokenizer/options.h"
#include "tokenizer/vocab.h"

namespace cera::tokenizer {

class Tokenizer {
 public:
  // Reads and validates the vocabulary; errors name the offending key. The GgufFile is only
  // read during the call (everything needed is copied).
  static Result<Tokenizer> from_gguf(const format::GgufFile& file);

  // Token ids of `text`. Invalid UTF-8 is accepted (bytes without a token fall back to byte
  // tokens where the vocabulary has them). Precondition: text.size() < 4 GiB.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // Same, appending to `out` (reuse one vector across calls to avoid allocation).
  void encode(std::string_view text, const EncodeOptions& options, std::vector<int32_t>& out) const;

  // The text of `ids`; ids outside the vocabulary contribute nothing.
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // The decoded bytes of one token (may be part of a UTF-8 character); "" for an invalid id.
  std::string_view token_piece(int32_t id, bool render_special = false) const;
  // The token's text as stored in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>"); "" if invalid.
  std::string_view token_text(int32_t id) const;

  int32_t n_vocab() const;
  // The texts that EncodeOptions::parse_special turns into control (or unknown) token ids, such
  // as "<|im_start|>" and "<s>": what text from a stranger must not be allowed to produce.
  std::vector<std::string_view> control_texts() const;
  ModelKind kind() const;
  int32_t bos() const;  // kNoToken when the vocabulary has none
  int32_t eos() const;
  int32_t eot() const;
  bool is_end_of_generation(int32_t id) const;
  const Vocab& vocab() const;

 private:
  friend class StreamDecoder;
  struct State;
  explicit Tokenizer(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Decodes a stream of ids (e.g. generated tokens) into text without ever emitting half a UTF-8
// character: bytes of an incomplete trailing sequence are held until the next token completes
// them or finish() flushes them. Not thread-safe; one per stream.
class StreamDecoder {
 public:
  explicit StreamDecoder(Tokenizer tokenizer, DecodeOptions options = {});

  // Appends to `out` the text that is complete after `id`.
  void push(int32_t id, std::string& out);
  std::string push(int32_t id) {
    std::string out;
    push(id, out);
    return out;
  }
  // Appends whatever is held back (possibly an invalid partial sequence) and resets the stream.
  void finish(std::string& out);
  std::string finish() {
    std::string out;
    finish(out);
    return out;
  }

 private:
  Tokenizer tokenizer_;
  DecodeOptions options_;
  bool strip_next_space_ = true;
  std::string pending_;  // decoded bytes not yet handed out
};

}  // namespace cera::tokenizer
