#include "model/blocks/scratch.h"

namespace cera::model {

Result<Scratch> Scratch::create(ops::Backend& backend, const ScratchSizes& sizes) {
  Scratch s;
  s.sizes_ = sizes;
  s.device_ = backend.device();
  auto alloc = [&](std::shared_ptr<ops::Buffer>& out, int64_t cols) -> Status {
    auto b = backend.allocate(static_cast<uint64_t>(cols * sizes.max_tokens) * sizeof(float));
    if (!b.ok()) return b.status();
    out = std::move(b).value();
    return {};
  };
  CERA_RETURN_IF_ERROR(alloc(s.x_, sizes.n_embd));
  CERA_RETURN_IF_ERROR(alloc(s.h_, sizes.n_embd));
  CERA_RETURN_IF_ERROR(alloc(s.q_, sizes.q_width));
  CERA_RETURN_IF_ERROR(alloc(s.k_, sizes.kv_width));
  CERA_RETURN_IF_ERROR(alloc(s.v_, sizes.kv_width));
  CERA_RETURN_IF_ERROR(alloc(s.attn_, sizes.q_width));
  CERA_RETURN_IF_ERROR(alloc(s.gate_, sizes.n_ff));
  CERA_RETURN_IF_ERROR(alloc(s.up_, sizes.n_ff));
  CERA_RETURN_IF_ERROR(alloc(s.logits_, sizes.n_vocab));
  if (sizes.n_vocab_part > 0) CERA_RETURN_IF_ERROR(alloc(s.logits_part_, sizes.n_vocab_part));
  return s;
}

TensorView Scratch::view(const std::shared_ptr<ops::Buffer>& b, int64_t cols, int64_t rows) const {
  CERA_CHECK(rows >= 1 && rows <= sizes_.max_tokens);
  return b->view(DType::kF32, {cols, rows, 1, 1}, device_);
}

}  // namespace cera::model
