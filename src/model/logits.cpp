// Host-side logit transforms shared by the decoders and the runtime.
#include <cmath>

#include "model/model.h"

namespace cera::model {

void apply_logit_softcap(std::span<float> logits, float cap) {
  if (cap <= 0.0f) return;
  for (float& l : logits) l = cap * std::tanh(l / cap);
}

}  // namespace cera::model
