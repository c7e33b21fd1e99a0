// Collectives between ranks that run on threads of one process over host memory (the CPU
// backend): the tensor-parallel split proven without GPUs, with the same calls NCCL answers on
// several devices. Each rank owns one slice of every collective's output and computes it from
// all ranks' inputs (a reduce-scatter and an all-gather in one), between two barriers. Tensors on
// a device are staged through the host by their rank's backend (download, sum, upload): correct
// on any backend, several ranks on one GPU included, but a synchronisation per collective, so
// only the CPU's and the tests' transport; GPUs of one host talk through NCCL.
#pragma once

#include <barrier>
#include <memory>
#include <vector>

#include "ops/backend.h"
#include "ops/collective.h"

namespace cera::ops {

class HostCollectiveGroup final : public CollectiveGroup {
 public:
  // `backends[r]`: rank r's, which stages its device tensors; may be empty when every tensor is
  // in host memory (CPU backends).
  explicit HostCollectiveGroup(int n_ranks, std::vector<Backend*> backends = {});
  ~HostCollectiveGroup();
  HostCollectiveGroup(const HostCollectiveGroup&) = delete;
  HostCollectiveGroup& operator=(const HostCollectiveGroup&) = delete;

  int n_ranks() const override { return static_cast<int>(endpoints_.size()); }
  // Rank r's endpoint, to be driven by one thread. Every rank must make the same sequence of
  // calls: a rank that stops calling (an error inside forward) leaves the others waiting, so
  // forward() checks its batch before the first collective, alike on every rank.
  Collective& rank(int r) override;

 private:
  class Endpoint;
  struct Slot {
    const TensorView* in = nullptr;   // this rank's input (all_reduce: also its output)
    const TensorView* out = nullptr;  // all_gather's output
  };
  void exchange(int rank, const TensorView* in, const TensorView* out);

  std::barrier<> barrier_;
  std::vector<Backend*> backends_;
  std::vector<Slot> slots_;  // [n_ranks], valid between the two barriers of a collective
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace cera::ops
