#include "runtime/embed/embed_service.h"

namespace cera::runtime::embed {

EmbedService::EmbedService(model::Model& model, const tokenizer::Tokenizer& tokenizer, EngineLoop* loop,
                           EmbedderOptions options)
    : model_(model), tokenizer_(tokenizer), loop_(loop), options_(options) {}

Result<Embedder*> EmbedService::embedder_locked() {
  if (!embedder_) {
    CERA_ASSIGN_OR_RETURN(embedder_, Embedder::create(model_, tokenizer_, options_));
  }
  return embedder_.get();
}

Result<std::vector<Embedding>> EmbedService::embed_texts(const std::vector<std::string>& texts,
                                                         const EmbedOptions& options) {
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) return invalid_argument("input " + std::to_string(i) + " is empty: there is nothing to embed");
  }
  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(texts.size());
  // Tokenizing needs no lock: the tokenizer is immutable and shared.
  for (const std::string& text : texts) inputs.push_back(tokenize_for_embedding(tokenizer_, text));
  return embed_tokens(inputs, options);
}

Result<std::vector<Embedding>> EmbedService::embed_tokens(const std::vector<std::vector<int32_t>>& inputs,
                                                          const EmbedOptions& options) {
  std::lock_guard lock(mu_);
  CERA_ASSIGN_OR_RETURN(Embedder* const embedder, embedder_locked());
  Result<std::vector<Embedding>> result = Status(ErrorCode::kInternal, "the embedding job did not run");
  const auto job = [&] { result = embedder->embed(inputs, options); };
  if (loop_ != nullptr) {
    CERA_RETURN_IF_ERROR(loop_->run_exclusive(job));
  } else {
    job();
  }
  return result;
}

}  // namespace cera::runtime::embed
