// The facade's Engine::embed over runtime::embed::Embedder. A decoder's embeddings run on its
// engine loop's thread between generation steps (EngineLoop::run_exclusive: the model's scratch
// is shared with the steps); an encoder has no loop and runs them on the caller's thread. Calls
// are serialised by Impl::embed_mu either way.
#include "api/facade_convert.h"
#include "api/facade_impl.h"

namespace cera {

Expected<std::vector<Embedding>> Engine::embed(const std::vector<std::string>& texts, const EmbedOptions& options) {
  Impl& impl = *impl_;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (texts[i].empty()) {
      return Error{.kind = ErrorKind::kInvalidArgument,
                   .message = "input " + std::to_string(i) + " is empty: there is nothing to embed"};
    }
  }
  std::lock_guard lock(impl.embed_mu);
  if (!impl.embedder) {
    auto made = runtime::embed::Embedder::create(impl.engine->model(), impl.engine->tokenizer(),
                                                 {.max_batch_tokens = impl.max_batch_tokens,
                                                  .kv_type = impl.engine->kv_type()});
    if (!made.ok()) return api::to_error(made.status().with_context("embeddings of " + impl.info.name));
    impl.embedder = std::move(made).value();
  }
  runtime::embed::Embedder& embedder = *impl.embedder;
  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(texts.size());
  for (const std::string& text : texts) inputs.push_back(embedder.tokenize(text));
  const runtime::embed::EmbedOptions opts{.pooling = api::from_pooling(options.pooling), .normalize = options.normalize};
  Result<std::vector<runtime::embed::Embedding>> result = Status(ErrorCode::kInternal, "embed job did not run");
  const auto job = [&] { result = embedder.embed(inputs, opts); };
  if (impl.loop) {
    const Status st = impl.loop->run_exclusive(job);
    if (!st.ok()) return api::to_error(st);
  } else {
    job();
  }
  if (!result.ok()) return api::to_error(result.status());
  std::vector<Embedding> out;
  out.reserve(result->size());
  for (auto& e : *result) out.push_back({.values = std::move(e.values), .n_tokens = e.n_tokens});
  return out;
}

}  // namespace cera
