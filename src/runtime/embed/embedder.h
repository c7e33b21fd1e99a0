// Embedder: texts -> vectors over a loaded model. Each text is tokenized as the model expects
// (BOS, or BERT's [CLS] ... [SEP]), whole texts are packed into forwards of at most
// max_batch_tokens tokens (one KV sequence each, in a small cache of the embedder's own), the
// final hidden states of the rows the pooling needs come back (ForwardOutput::kHidden) and are
// pooled and normalised on the host.
//
// Decision: a text must fit one forward. An encoder needs it (bidirectional attention sees the
// whole sequence at once); for a decoder it keeps one code path and a bounded cache, and the
// limit is max_batch_tokens, which the user sets (an error names the text, its length and that
// option).
//
// Not thread-safe, and it shares the model's scratch buffers with every other user of the
// model: a decoder's embed() must run where no generation step does (EngineLoop::run_exclusive).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "runtime/embed/pooling.h"
#include "runtime/kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime::embed {

// The tokens a text is embedded as: with the model's special tokens (BOS, or [CLS] ... [SEP]).
std::vector<int32_t> tokenize_for_embedding(const tokenizer::Tokenizer& tokenizer, std::string_view text);

struct EmbedderOptions {
  int32_t max_batch_tokens = 512;  // tokens per forward; at most the model's LoadOptions value
  DType kv_type = DType::kF32;
  int32_t max_sequences = 64;      // texts per forward (each takes at least one KV block)
};

struct EmbedOptions {
  std::optional<Pooling> pooling;  // nullopt: default_pooling()
  std::optional<bool> normalize;   // nullopt: default_normalize()
};

struct Embedding {
  std::vector<float> values;  // [n_embd], or [n_tokens][n_embd] for Pooling::kNone
  int32_t n_tokens = 0;       // tokens the text became
};

class Embedder {
 public:
  static Result<std::unique_ptr<Embedder>> create(model::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                  const EmbedderOptions& options);

  // The file's pooling_type; else kMean for an encoder, kLast for a causal decoder.
  static Pooling default_pooling(const model::Model& model);
  Pooling default_pooling() const { return default_pooling_; }
  // The file's cera.embedding.normalize (true when absent).
  bool default_normalize() const { return default_normalize_; }
  int32_t n_embd() const { return n_embd_; }
  // The longest text embed() takes, in tokens: max_batch_tokens, and the model's context_length
  // for an encoder (its learned positions end there).
  int32_t max_input_tokens() const { return max_input_tokens_; }

  std::vector<int32_t> tokenize(std::string_view text) const;  // tokenize_for_embedding

  // One embedding per input, in order. Refuses (naming the input's index) an empty input, one
  // longer than max_input_tokens() or one with ids outside the vocabulary.
  Result<std::vector<Embedding>> embed(std::span<const std::vector<int32_t>> inputs, const EmbedOptions& options);

 private:
  Embedder(model::Model& model, const tokenizer::Tokenizer& tokenizer, KvCache cache, const EmbedderOptions& options);
  Status check_inputs(std::span<const std::vector<int32_t>> inputs) const;
  // Runs inputs[first, last) in one forward, appending their embeddings to `out`.
  Status forward_group(std::span<const std::vector<int32_t>> inputs, size_t first, size_t last, Pooling pooling,
                       bool normalize, std::vector<Embedding>& out);

  model::Model& model_;
  const tokenizer::Tokenizer& tokenizer_;
  KvCache cache_;
  EmbedderOptions options_;
  Pooling default_pooling_ = Pooling::kMean;
  bool default_normalize_ = true;
  int32_t n_embd_ = 0;
  int32_t max_input_tokens_ = 0;
  // Per-forward buffers, kept to avoid reallocating.
  std::vector<int32_t> tokens_, positions_, token_seq_, slots_, ring_slots_, tables_, table_offset_, ring_tables_,
      ring_offset_, outputs_;
  std::vector<TensorView> state_;
  std::vector<float> hidden_;
};

}  // namespace cera::runtime::embed
