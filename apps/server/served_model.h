// ServedModel: what the routes need of the loaded model, set once loading has finished: the
// engine (tokenizer, file), the engine loop every request goes through, the chat template and
// the limits a request is checked against, and the embedding service. Read-only after start-up, shared by every HTTP thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/engine.h"
#include "runtime/chat/chat_template.h"
#include "runtime/embed/embed_service.h"
#include "runtime/engine/engine_loop.h"
#include "runtime/grammar/vocab_index.h"

namespace cera::server {

struct ServedModel {
  api::Engine* engine = nullptr;
  runtime::EngineLoop* loop = nullptr;  // null: an encoder (bert), which only embeds
  runtime::embed::EmbedService* embeddings = nullptr;  // /v1/embeddings
  std::optional<runtime::chat::ChatTemplate> chat_template;  // none: the file has none (chat refused)
  std::string chat_template_error;                           // why there is none
  runtime::chat::SpecialTokenTexts special;                  // bos / eos texts for the template
  std::string id;               // the model name clients pass and /v1/models lists
  int64_t created = 0;          // unix time the server loaded it
  int32_t n_ctx = 0;            // tokens per request: prompt + output
  int32_t max_tokens = 0;       // most tokens one request may generate (--max-tokens)
  bool allow_special = false;   // control-token texts in messages become control tokens (--allow-special)
  std::shared_ptr<const runtime::grammar::VocabIndex> vocab;  // the tokenizer's, for grammars (response_format, tools)

  const tokenizer::Tokenizer& tokenizer() const { return engine->tokenizer(); }
};

}  // namespace cera::server
