#include "model/host_collective.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"

namespace cera::model {

class HostCollectiveGroup::Endpoint final : public Collective {
 public:
  Endpoint(HostCollectiveGroup& group, int rank) : group_(group), rank_(rank) {}
  ShardSpec spec() const override { return {.rank = rank_, .n_ranks = group_.n_ranks()}; }

  // Rank r sums chunk r of every rank's x in rank order and writes it back to all of them: the
  // chunks are disjoint, so no two threads touch the same floats.
  void all_reduce_sum(const TensorView& x) override {
    check_host(x, "all_reduce_sum");
    group_.exchange(rank_, &x, nullptr);
    const int n = group_.n_ranks();
    const int64_t len = x.n_elements();
    const int64_t first = len * rank_ / n, last = len * (rank_ + 1) / n;
    for (int r = 0; r < n; ++r) {
      CERA_CHECK_MSG(group_.slots_[r].in->n_elements() == len,
                     "all_reduce_sum: ranks passed tensors of different sizes");
    }
    std::vector<float*> ranks(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) ranks[r] = reinterpret_cast<float*>(group_.slots_[r].in->data);
    for (int64_t i = first; i < last; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < n; ++r) sum += ranks[r][i];
      for (int r = 0; r < n; ++r) ranks[r][i] = sum;
    }
    group_.barrier_.arrive_and_wait();  // no rank reads x before every chunk is written
  }

  void all_gather_cols(const TensorView& part, const TensorView& whole) override {
    check_host(part, "all_gather_cols part");
    check_host(whole, "all_gather_cols whole");
    const int n = group_.n_ranks();
    CERA_CHECK_MSG(whole.cols() == part.cols() * n && whole.rows() == part.rows(),
                   "all_gather_cols: whole must be [n_ranks * part cols, part rows]");
    group_.exchange(rank_, &part, &whole);
    const int64_t cols = part.cols();
    for (int r = 0; r < n; ++r) {
      const TensorView& src = *group_.slots_[r].in;
      CERA_CHECK_MSG(src.cols() == cols && src.rows() == part.rows(),
                     "all_gather_cols: ranks passed parts of different shapes");
      for (int64_t row = 0; row < part.rows(); ++row) {
        std::memcpy(whole.row_as<float>(row) + r * cols, src.row_as<const float>(row),
                    static_cast<size_t>(cols) * sizeof(float));
      }
    }
    group_.barrier_.arrive_and_wait();  // no rank overwrites its part before all have read it
  }

 private:
  static void check_host(const TensorView& t, const char* what) {
    CERA_CHECK_MSG(t.device == Device::kCpu && t.dtype == DType::kF32 && t.packed(),
                   std::string(what) + ": the host collective takes packed F32 host tensors");
  }
  HostCollectiveGroup& group_;
  int rank_;
};

HostCollectiveGroup::HostCollectiveGroup(int n_ranks)
    : barrier_(n_ranks), slots_(static_cast<size_t>(n_ranks)) {
  CERA_CHECK_MSG(n_ranks >= 1, "a collective group needs at least one rank");
  for (int r = 0; r < n_ranks; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
}

HostCollectiveGroup::~HostCollectiveGroup() = default;

Collective& HostCollectiveGroup::rank(int r) {
  CERA_CHECK_MSG(r >= 0 && r < n_ranks(), "no such rank in the collective group");
  return *endpoints_[static_cast<size_t>(r)];
}

// Publishes this rank's tensors and waits for every rank's: the CPU backend's verbs have
// completed when they return, so the inputs are final.
void HostCollectiveGroup::exchange(int rank, const TensorView* in, const TensorView* out) {
  slots_[static_cast<size_t>(rank)] = {.in = in, .out = out};
  barrier_.arrive_and_wait();
}

}  // namespace cera::model
