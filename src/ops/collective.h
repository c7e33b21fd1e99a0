// The communication between the tensor-parallel ranks of one model (src/model/shard.h, which
// says what is split): the
// all-reduce that sums the partial outputs of the row-split Linears (attention O, FFN down, the
// short convolution's out_proj, the vocabulary-split embedding) and the gather of the
// vocabulary-split logits. Each rank's model holds its own endpoint and calls the same sequence of
// collectives with tensors of the same shapes, as NCCL requires; a collective returns when this
// rank's result is in place, and then every rank holds the same values (the sums are taken in
// rank order, so the residual streams stay bitwise equal across ranks).
#pragma once

#include "core/tensor.h"

namespace cera::ops {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int n_ranks() const = 0;
  // x = the sum over the ranks of their x (F32, packed, same shape on every rank), in place.
  virtual void all_reduce_sum(const TensorView& x) = 0;
  // whole[n_ranks * part.cols(), part.rows()] = the ranks' parts side by side along ne[0], rank 0
  // first: the logits of the vocabulary-split output head (F32, packed).
  virtual void all_gather_cols(const TensorView& part, const TensorView& whole) = 0;
};

// Every rank's endpoint, owned together (HostCollectiveGroup; NCCL's communicators).
class CollectiveGroup {
 public:
  virtual ~CollectiveGroup() = default;
  virtual int n_ranks() const = 0;
  virtual Collective& rank(int r) = 0;  // to be driven by one thread
};

}  // namespace cera::ops
