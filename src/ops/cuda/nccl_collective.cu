// NCCL through dlopen: the handful of entry points cera uses, resolved once, and the two
// collectives as graph-recordable calls on the ranks' backends.
#include <dlfcn.h>
#include <nccl.h>

#include <mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "ops/cuda/bind_device.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/nccl_collective.h"
#include "ops/cuda/nccl_ops.h"

namespace cera::ops {
namespace cuda {
namespace {

// The NCCL entry points, from libnccl.so.2 (the toolkit's, or one on LD_LIBRARY_PATH).
struct NcclApi {
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string error;  // why loading failed; empty when every pointer is set
};

const NcclApi& nccl_api() {
  static const NcclApi api = [] {
    NcclApi a;
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      a.error = std::string("cannot load NCCL (libnccl.so.2): ") + (why != nullptr ? why : "not found") +
                "; install NCCL (the CUDA toolkit's, or Debian's libnccl2) or add its directory to LD_LIBRARY_PATH";
      return a;
    }
    auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && a.error.empty()) a.error = std::string("NCCL has no ") + name;
    };
    resolve(a.comm_init_all, "ncclCommInitAll");
    resolve(a.comm_destroy, "ncclCommDestroy");
    resolve(a.all_reduce, "ncclAllReduce");
    resolve(a.all_gather, "ncclAllGather");
    resolve(a.error_string, "ncclGetErrorString");
    return a;  // the library stays loaded for the process
  }();
  return api;
}

void check_nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  CERA_CHECK_MSG(false, std::string(what) + ": " + nccl_api().error_string(r));
}

// whole[row][r * cols + c] = staging[r][row][c]: the gathered parts interleaved by row.
__global__ void interleave_cols_kernel(float* whole, const float* staging, int64_t cols, int64_t rows,
                                       int n_ranks) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_rank = cols * rows;
  if (i >= per_rank * n_ranks) return;
  const int64_t r = i / per_rank, rest = i % per_rank, row = rest / cols, c = rest % cols;
  whole[row * cols * n_ranks + r * cols + c] = staging[i];
}

}  // namespace

void nccl_all_reduce(CudaContext& ctx, const TensorView& x, const void* comm) {
  CERA_CHECK_MSG(x.dtype == DType::kF32 && x.packed() && x.device == Device::kCuda,
                 "all_reduce_sum: a packed F32 CUDA tensor");
  if (!ctx.launching() || x.n_elements() == 0) return;
  check_nccl(nccl_api().all_reduce(x.data, x.data, size_t(x.n_elements()), ncclFloat32, ncclSum,
                                   static_cast<ncclComm_t>(const_cast<void*>(comm)), ctx.stream()),
             "ncclAllReduce");
}

void nccl_all_gather_cols(CudaContext& ctx, const TensorView& whole, const TensorView& part,
                          const TensorView& staging, const void* comm) {
  CERA_CHECK_MSG(whole.dtype == DType::kF32 && part.dtype == DType::kF32 && whole.packed() && part.packed(),
                 "all_gather_cols: packed F32 tensors");
  const int64_t n_ranks = part.cols() > 0 ? whole.cols() / part.cols() : 0;
  CERA_CHECK_MSG(n_ranks > 0 && whole.cols() == n_ranks * part.cols() && whole.rows() == part.rows() &&
                     staging.n_elements() >= n_ranks * part.n_elements(),
                 "all_gather_cols: whole must be [n_ranks * part cols, part rows], staging n_ranks parts");
  if (!ctx.launching() || part.n_elements() == 0) return;
  check_nccl(nccl_api().all_gather(part.data, staging.data, size_t(part.n_elements()), ncclFloat32,
                                   static_cast<ncclComm_t>(const_cast<void*>(comm)), ctx.stream()),
             "ncclAllGather");
  const int64_t total = n_ranks * part.n_elements();
  constexpr int kThreads = 256;
  interleave_cols_kernel<<<unsigned((total + kThreads - 1) / kThreads), kThreads, 0, ctx.stream()>>>(
      reinterpret_cast<float*>(whole.data), reinterpret_cast<const float*>(staging.data), part.cols(), part.rows(),
      int(n_ranks));
  CERA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda

namespace {

class NcclGroup;

class NcclEndpoint final : public Collective {
 public:
  NcclEndpoint(Backend& backend, ncclComm_t comm, int rank, int n_ranks)
      : backend_(backend), comm_(comm), rank_(rank), n_ranks_(n_ranks) {}
  int rank() const override { return rank_; }
  int n_ranks() const override { return n_ranks_; }

  void all_reduce_sum(const TensorView& x) override {
    cuda::post_call(backend_, {.verb = cuda::Verb::kAllReduce, .out = x, .comm = comm_});
  }
  void all_gather_cols(const TensorView& part, const TensorView& whole) override {
    const auto need = static_cast<uint64_t>(part.n_elements() * n_ranks_) * sizeof(float);
    if (!staging_ || staging_->size() < need) {
      // Grown to the largest gather seen (the logits of the biggest batch); a new buffer gives
      // the graphs a new signature, so none keeps the old pointer.
      auto b = backend_.allocate(need);
      CERA_CHECK_MSG(b.ok(), "all_gather_cols staging: " + b.status().to_string());
      staging_ = std::move(b).value();
    }
    const TensorView staging = staging_->view(DType::kF32, {part.n_elements() * n_ranks_, 1, 1, 1}, Device::kCuda);
    cuda::post_call(backend_,
                    {.verb = cuda::Verb::kAllGatherCols, .out = whole, .a = part, .b = staging, .comm = comm_});
  }

 private:
  Backend& backend_;
  ncclComm_t comm_;
  int rank_, n_ranks_;
  std::unique_ptr<Buffer> staging_;
};

class NcclGroup final : public CollectiveGroup {
 public:
  NcclGroup(std::vector<ncclComm_t> comms, std::span<Backend* const> backends) : comms_(std::move(comms)) {
    for (size_t r = 0; r < comms_.size(); ++r) {
      endpoints_.push_back(std::make_unique<NcclEndpoint>(*backends[r], comms_[r], int(r), int(comms_.size())));
    }
  }
  ~NcclGroup() override {
    endpoints_.clear();  // their staging buffers first
    for (ncclComm_t c : comms_) cuda::nccl_api().comm_destroy(c);  // errors ignored: destructors must not throw
  }
  int n_ranks() const override { return int(comms_.size()); }
  Collective& rank(int r) override {
    CERA_CHECK_MSG(r >= 0 && r < n_ranks(), "no such rank in the NCCL group");
    return *endpoints_[size_t(r)];
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<NcclEndpoint>> endpoints_;
};

}  // namespace

Result<std::unique_ptr<CollectiveGroup>> make_nccl_group(std::span<Backend* const> backends,
                                                         std::span<const int32_t> devices) {
  if (backends.empty() || backends.size() != devices.size()) {
    return invalid_argument("NCCL group: one CUDA backend and one device per rank");
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (backends[i]->device() != Device::kCuda) return invalid_argument("NCCL group: rank " + std::to_string(i) + " is not on CUDA");
    for (size_t j = 0; j < i; ++j) {
      if (devices[i] == devices[j]) {
        return invalid_argument("NCCL group: ranks " + std::to_string(j) + " and " + std::to_string(i) +
                                " are both on CUDA device " + std::to_string(devices[i]) +
                                "; NCCL needs one GPU per rank");
      }
    }
  }
  const cuda::NcclApi& api = cuda::nccl_api();
  if (!api.error.empty()) return unsupported("tensor parallelism on CUDA: " + api.error);
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  const ncclResult_t r = api.comm_init_all(comms.data(), int(devices.size()), devices.data());
  cuda::rebind_device(devices[0]);  // ncclCommInitAll made each device current in turn
  if (r != ncclSuccess) {
    return io_error(std::string("ncclCommInitAll over ") + std::to_string(devices.size()) +
                    " devices: " + api.error_string(r));
  }
  return std::unique_ptr<CollectiveGroup>(std::make_unique<NcclGroup>(std::move(comms), backends));
}

}  // namespace cera::ops
