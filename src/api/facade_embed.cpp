// The facade's Engine::embed over runtime::embed::EmbedService (which says where it runs).
#include "api/facade_convert.h"
#include "api/facade_impl.h"

namespace cera {

Expected<std::vector<Embedding>> Engine::embed(const std::vector<std::string>& texts, const EmbedOptions& options) {
  auto result = impl_->embeddings->embed_texts(
      texts, {.pooling = api::from_pooling(options.pooling), .normalize = options.normalize});
  if (!result.ok()) return api::to_error(result.status());
  std::vector<Embedding> out;
  out.reserve(result->size());
  for (auto& e : *result) out.push_back({.values = std::move(e.values), .n_tokens = e.n_tokens});
  return out;
}

}  // namespace cera
