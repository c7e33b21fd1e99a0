// Activation buffers for one forward pass, sized for the largest batch and reused by every layer
// (layers run one after another, so one set suffices).
#pragma once

#include <memory>

#include "core/status.h"
#include "ops/backend.h"

namespace cera::model {

struct ScratchSizes {
  int64_t n_embd = 0;
  int64_t q_width = 0;   // n_head * head_dim
  int64_t kv_width = 0;  // n_head_kv * head_dim
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_vocab_part = 0;  // tensor parallel: the rank's vocabulary slice (0 when unsplit)
  int64_t max_tokens = 0;
};

class Scratch {
 public:
  static Result<Scratch> create(ops::Backend& backend, const ScratchSizes& sizes);

  // Views shaped for n_tokens rows (n_tokens <= max_tokens).
  TensorView x(int64_t n) const { return view(x_, sizes_.n_embd, n); }        // residual stream
  TensorView h(int64_t n) const { return view(h_, sizes_.n_embd, n); }        // normed input / block output
  TensorView q(int64_t n) const { return view(q_, sizes_.q_width, n); }
  TensorView k(int64_t n) const { return view(k_, sizes_.kv_width, n); }
  TensorView v(int64_t n) const { return view(v_, sizes_.kv_width, n); }
  TensorView attn(int64_t n) const { return view(attn_, sizes_.q_width, n); }
  TensorView gate(int64_t n) const { return view(gate_, sizes_.n_ff, n); }
  TensorView up(int64_t n) const { return view(up_, sizes_.n_ff, n); }
  TensorView logits(int64_t n) const { return view(logits_, sizes_.n_vocab, n); }
  TensorView logits_part(int64_t n) const { return view(logits_part_, sizes_.n_vocab_part, n); }  // split only
  int64_t max_tokens() const { return sizes_.max_tokens; }

 private:
  TensorView view(const std::shared_ptr<ops::Buffer>& b, int64_t cols, int64_t rows) const;

  ScratchSizes sizes_;
  Device device_ = Device::kCpu;
  std::shared_ptr<ops::Buffer> x_, h_, q_, k_, v_, attn_, gate_, up_, logits_, logits_part_;
};

}  // namespace cera::model
