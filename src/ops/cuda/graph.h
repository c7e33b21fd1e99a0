// Transparent CUDA graphs for the eager verb API. Verbs are logged (validated at once, launched
// later) from the first verb after a synchronisation point until download()/synchronize(); the
// log is then launched as one graph. A log is keyed by its signature (every call's verb, views,
// scalars and host-array staging slots: everything but the host arrays' contents), so a decode
// step whose only change is positions/slots/block-table contents relaunches the cached executable
// graph without capture; a new signature is captured and either updates the executable graph of
// the same topology (cudaGraphExecUpdate) or is instantiated. Host arrays are copied at record
// time into a pinned staging arena whose device mirror one memcpy node at the graph's head fills.
// The arena has kArenaSlots parts used by successive logs in turn, so the host can record step
// N+1 while the graph of step N (reading another part) still runs: a log waits only for the
// launch that last used its part (the engine loop's overlapped decode, EngineLoopOptions::
// pipeline). Three parts, not two: a decode step with grammar masks is two logs (the forward,
// launched at once, then the masks and the argmax once the host has the previous tokens), and
// the next forward must not wait for the forward still running.
// Decision: logging (rather than capturing every forward) is what removes the host cost: a hit
// costs validation + a signature compare + one cudaGraphLaunch. Replay also fuses call patterns
// (fused.h) that the eager API cannot see. Prompt-path (cuBLAS) batches run eagerly, except up to
// graphed_gemm_rows() rows (cuda_ops.h; off by default).
// Measured on the H200 (docs/benchmarks/cuda.md): 1B Q4_0 decode 591 t/s eager -> 939 with graphs
// and the fusions, same run; 8B Q4_0 237 -> 307.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ops/cuda/cuda_context.h"

namespace cera::ops::cuda {

inline constexpr int kArenaSlots = 3;

enum class Verb : uint8_t {
  kEmbed, kMatmul, kRmsNorm, kRope, kGatedActivation, kAddScaled, kScale, kKvStore, kAttention, kTopK,
  kShortConv, kMoeRoute, kMatmulExperts, kMoeCombine, kEmbedIds, kMaskLogits, kLayerNorm, kActivation,
  kAllReduce, kAllGatherCols, kEmbedSlice,
};

// One verb call with its arguments by value. Views by verb: embed (out, a = table); embed_ids
// (out, a = table, b = ids); matmul (out,
// a = weight, b = x, c = bias or null data); rms_norm (out, a = x, b = weight); rope (out = x);
// gated_activation (out, a = gate, b = up); add_scaled (out, a, b); scale (out = x);
// layer_norm (out, a = x, b = weight, c = bias, f = eps); activation (out, a = x, act);
// kv_store (a = k, b = v); attention (out, a = q); top_k (out = ids, a = logits, b = values,
// c = lse, f = softcap, n = k); mask_logits (out = logits; masks = i[0] as words, rows = i[1]).
// Host arrays: embed tokens = i[0]; rope
// positions = i[0] (freq_factors in rope); kv_store slots = i[0]; attention positions, token_seq,
// block_tables, table_offset = i[0..3].
// Optional verbs: short_conv (out, a = bcx, b = kernel, c = state); moe_route (out = ids,
// a = weights, b = logits, c = selection bias or null data, router without its bias pointer);
// matmul_experts (out, a = experts, b = x, c = ids); moe_combine (out, a = expert_out, b = weights).
// Tensor-parallel collectives (nccl_collective.h; comm = the rank's ncclComm_t): all_reduce
// (out = x); all_gather_cols (out = whole, a = part, b = staging of n_ranks parts). embed_slice
// (out, a = table's rows of this rank, i[0] = the tokens' rows in it, -1 where another rank holds
// the token: a zero row).
struct Call {
  Verb verb = Verb::kScale;
  TensorView out, a, b, c;
  KvLayer layer;
  float f = 0.0f;  // embed scale, rms eps, add_scaled scale, scale factor
  Activation act = Activation::kSilu;
  RopeParams rope;
  AttentionParams attn;
  RouterParams router;
  int32_t n = 0;
  std::span<const int32_t> i[4];
  const void* comm = nullptr;
};

// Queues a call on a CUDA backend (make_cuda_backend's) as its own verbs are: logged into its
// graphs or run eagerly, in order on its stream. For verbs that live outside the Backend
// interface (the collectives).
void post_call(Backend& cuda_backend, const Call& call);

// Runs one call through the op entries in ctx's current mode.
void execute(CudaContext& ctx, const Call& call);

class GraphRunner {
 public:
  GraphRunner(CudaContext& ctx, bool enabled);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Records the call (its host arrays copied) or runs it eagerly; throws what the op entry throws.
  void run(const Call& call);
  // Launches what is logged (no host synchronisation); the next verb starts a new log.
  void flush();
  // Device memory freed or overwritten outside the verbs (buffer release, upload, copy).
  void memory_changed(const void* data, uint64_t bytes) { ctx_.memory_changed(data, bytes); }
  // The caller synchronised the stream: staging may be rewritten without waiting.
  void synced() {
    for (bool& u : half_unsynced_) u = false;
  }

  struct Stats {
    uint64_t launches = 0, captures = 0, updates = 0, instantiations = 0;
    // Host time spent logging verbs (run) and launching logs (flush, captures included).
    double record_seconds = 0, flush_seconds = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  enum class Segment : uint8_t { kNone, kRecord, kEager };
  struct Entry {
    uint64_t hash = 0, topo = 0, last_use = 0;
    std::vector<uint64_t> sig;
    cudaGraphExec_t exec = nullptr;
  };
  bool recordable(const Call& c) const;
  bool stage(Call& c);  // copies c's host arrays into the arena; false when it is full
  std::span<const int32_t> stage_array(std::span<const int32_t> a, bool& ok);
  const std::byte* stage_bytes(const void* p, uint64_t bytes, bool& ok);
  cudaGraph_t capture();
  Entry& install(cudaGraph_t graph, uint64_t hash, uint64_t topo, std::vector<uint64_t>&& sig);
  void clear_entries();

  CudaContext& ctx_;
  bool enabled_;
  Segment segment_ = Segment::kNone;
  std::vector<Call> log_;
  std::byte* arena_host_ = nullptr;  // pinned
  std::byte* arena_device_ = nullptr;
  int half_ = 0;           // the arena part this log stages into
  uint64_t arena_pos_ = 0;  // bytes staged in it
  struct Staged {
    const void* src;
    uint64_t bytes, offset;
  };
  std::vector<Staged> staged_;  // this log's copies, for reuse of repeated arrays
  std::vector<Entry> entries_;
  uint64_t use_clock_ = 0, epoch_ = 0;
  uint64_t half_base() const;  // offset of part half_ in the arena
  // Per part: recorded after the last launch that read it, and whether it may still be running.
  cudaEvent_t half_done_[kArenaSlots] = {};
  bool half_unsynced_[kArenaSlots] = {};
  std::vector<uint64_t> sig_;  // scratch for the signature being built
  Stats stats_;
  std::unique_ptr<class VerbProfiler> profiler_;  // CERA_CUDA_PROFILE=1 (profile.h)
};

}  // namespace cera::ops::cuda
