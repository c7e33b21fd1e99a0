// Engine::Impl: what a loaded facade engine holds. The internal Engine (file, backend, model,
// tokenizer), the engine loop every generation goes through (none for an encoder, which only
// embeds), the chat template, and what is built on first use: the grammar vocabulary index and the embedder. Shared by the facade's files (facade_engine.cpp, facade_embed.cpp).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api/engine.h"
#include "cera/engine.h"
#include "runtime/chat/chat_template.h"
#include "runtime/embed/embed_service.h"
#include "runtime/engine/engine_loop.h"
#include "runtime/grammar/vocab_index.h"

namespace cera {

struct Engine::Impl {
  std::unique_ptr<api::Engine> engine;
  std::unique_ptr<runtime::EngineLoop> loop;  // null: an encoder
  std::optional<runtime::chat::ChatTemplate> chat_template;
  std::string chat_template_error;  // why there is none
  runtime::chat::SpecialTokenTexts special;
  ModelInfo info;
  int32_t max_batch_tokens = 0;

  // The vocabulary index grammars are built over, made on first use (it reads every token once).
  std::shared_ptr<const runtime::grammar::VocabIndex> vocab();

  std::unique_ptr<runtime::embed::EmbedService> embeddings;  // over `loop` when there is one

 private:
  std::once_flag vocab_once_;
  std::shared_ptr<const runtime::grammar::VocabIndex> vocab_;
};

}  // namespace cera
