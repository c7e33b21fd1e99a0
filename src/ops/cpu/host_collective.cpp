#include "ops/cpu/host_collective.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"

namespace cera::ops {

class HostCollectiveGroup::Endpoint final : public Collective {
 public:
  Endpoint(HostCollectiveGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int n_ranks() const override { return group_.n_ranks(); }

  // Rank r sums chunk r of every rank's x in rank order and writes it back to all of them: the
  // chunks are disjoint, so no two threads touch the same floats.
  void all_reduce_sum(const TensorView& x) override {
    const TensorView h = on_host(x, in_, "all_reduce_sum", /*read=*/true);
    group_.exchange(rank_, &h, nullptr);
    const int n = group_.n_ranks();
    const int64_t len = h.n_elements();
    const int64_t first = len * rank_ / n, last = len * (rank_ + 1) / n;
    std::vector<float*> ranks(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      CERA_CHECK_MSG(group_.slots_[r].in->n_elements() == len,
                     "all_reduce_sum: ranks passed tensors of different sizes");
      ranks[r] = reinterpret_cast<float*>(group_.slots_[r].in->data);
    }
    for (int64_t i = first; i < last; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < n; ++r) sum += ranks[r][i];
      for (int r = 0; r < n; ++r) ranks[r][i] = sum;
    }
    group_.barrier_.arrive_and_wait();  // no rank reads x before every chunk is written
    if (h.data != x.data) backend().upload(x, h.data);
  }

  void all_gather_cols(const TensorView& part, const TensorView& whole) override {
    const int n = group_.n_ranks();
    CERA_CHECK_MSG(whole.cols() == part.cols() * n && whole.rows() == part.rows(),
                   "all_gather_cols: whole must be [n_ranks * part cols, part rows]");
    const TensorView p = on_host(part, in_, "all_gather_cols part", /*read=*/true);
    const TensorView w = on_host(whole, out_, "all_gather_cols whole", /*read=*/false);
    group_.exchange(rank_, &p, &w);
    const int64_t cols = p.cols();
    for (int r = 0; r < n; ++r) {
      const TensorView& src = *group_.slots_[r].in;
      CERA_CHECK_MSG(src.cols() == cols && src.rows() == p.rows(),
                     "all_gather_cols: ranks passed parts of different shapes");
      for (int64_t row = 0; row < p.rows(); ++row) {
        std::memcpy(w.row_as<float>(row) + r * cols, src.row_as<const float>(row),
                    static_cast<size_t>(cols) * sizeof(float));
      }
    }
    group_.barrier_.arrive_and_wait();  // no rank overwrites its part before all have read it
    if (w.data != whole.data) backend().upload(whole, w.data);
  }

 private:
  Backend& backend() const {
    CERA_CHECK_MSG(static_cast<size_t>(rank_) < group_.backends_.size(),
                   "host collective: a device tensor, but no backend to stage it through");
    return *group_.backends_[static_cast<size_t>(rank_)];
  }
  // `t` itself when it is in host memory; else a host copy in `stage` (downloaded when `read`).
  TensorView on_host(const TensorView& t, std::vector<float>& stage, const char* what, bool read) {
    CERA_CHECK_MSG(t.dtype == DType::kF32 && t.packed(),
                   std::string(what) + ": the host collective takes packed F32 tensors");
    if (t.device == Device::kCpu) return t;
    stage.resize(static_cast<size_t>(t.n_elements()));
    if (read) backend().download(stage.data(), t);
    return make_view(stage.data(), DType::kF32, t.ne);
  }

  HostCollectiveGroup& group_;
  int rank_;
  std::vector<float> in_, out_;  // host copies of device tensors
};

HostCollectiveGroup::HostCollectiveGroup(int n_ranks, std::vector<Backend*> backends)
    : barrier_(n_ranks), backends_(std::move(backends)), slots_(static_cast<size_t>(n_ranks)) {
  CERA_CHECK_MSG(n_ranks >= 1, "a collective group needs at least one rank");
  for (int r = 0; r < n_ranks; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
}

HostCollectiveGroup::~HostCollectiveGroup() = default;

Collective& HostCollectiveGroup::rank(int r) {
  CERA_CHECK_MSG(r >= 0 && r < n_ranks(), "no such rank in the collective group");
  return *endpoints_[static_cast<size_t>(r)];
}

// Publishes this rank's tensors and waits for every rank's: the CPU backend's verbs have
// completed when they return, and a staged tensor was downloaded (which waits), so the inputs
// are final.
void HostCollectiveGroup::exchange(int rank, const TensorView* in, const TensorView* out) {
  slots_[static_cast<size_t>(rank)] = {.in = in, .out = out};
  barrier_.arrive_and_wait();
}

}  // namespace cera::ops
