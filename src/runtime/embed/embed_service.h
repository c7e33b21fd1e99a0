// EmbedService: the one way front ends (the facade, the C ABI through it, `cera serve`, `cera
// embed`) get embeddings of a loaded model. It owns the Embedder, made on first use (its KV
// cache is memory an engine that only generates never needs), serialises calls, and runs each
// where the model is free: for a decoder, on its engine loop's thread between generation steps
// (EngineLoop::run_exclusive, since the steps share the model's scratch); for an encoder, which
// has no loop, on the caller's thread. Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "runtime/embed/embedder.h"
#include "runtime/engine/engine_loop.h"

namespace cera::runtime::embed {

class EmbedService {
 public:
  // `loop`: the engine loop generating with `model`, or nullptr (an encoder, or a model nothing
  // else uses). model, tokenizer and loop must outlive the service.
  EmbedService(model::Model& model, const tokenizer::Tokenizer& tokenizer, EngineLoop* loop, EmbedderOptions options);

  Pooling default_pooling() const { return Embedder::default_pooling(model_); }
  int32_t n_embd() const { return model_.hparams().n_embd; }

  // Texts are tokenized as the model expects (Embedder::tokenize); an empty text is refused
  // naming its index, like every other refusal (Embedder::embed).
  Result<std::vector<Embedding>> embed_texts(const std::vector<std::string>& texts, const EmbedOptions& options);
  Result<std::vector<Embedding>> embed_tokens(const std::vector<std::vector<int32_t>>& inputs, const EmbedOptions& options);

 private:
  Result<Embedder*> embedder_locked();

  model::Model& model_;
  const tokenizer::Tokenizer& tokenizer_;
  EngineLoop* loop_;
  EmbedderOptions options_;
  std::mutex mu_;
  std::unique_ptr<Embedder> embedder_;  // guarded by mu_
};

}  // namespace cera::runtime::embed
