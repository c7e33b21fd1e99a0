// GraphRunner (graph.h): the call log, the staging arena, signatures and the executable-graph
// cache. Measured effects are in docs/benchmarks/cuda.md.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/gemm_rows.h"
#include "ops/cuda/fused.h"
#include "ops/cuda/graph.h"
#include "ops/cuda/embed_slice.h"
#include "ops/cuda/nccl_ops.h"
#include "ops/cuda/profile.h"

namespace cera::ops::cuda {
namespace {

// Adds the seconds of its scope to a counter (GraphRunner::Stats).
class HostTimer {
 public:
  explicit HostTimer(double& total) : total_(total), t0_(std::chrono::steady_clock::now()) {}
  ~HostTimer() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }
  HostTimer(const HostTimer&) = delete;
  HostTimer& operator=(const HostTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point t0_;
};

// kArenaSlots parts of host arrays (graph.h): decode needs a few KB a log, grammar masks 6 KB (a
// 49k vocabulary) to 32 KB (262k) a constrained row; a log whose arrays do not fit runs eagerly.
constexpr uint64_t kArenaBytes = 12ull << 20;
constexpr uint64_t kHalfBytes = kArenaBytes / kArenaSlots;  // one log's room
// Executable graphs kept (LRU). The arena part is part of a log's topology, so a decode shape
// cycling through the parts keeps one graph a part (replays, no cudaGraphExecUpdate per step);
// 24 holds those of a session's decode, its short prompt tails and a few batch buckets.
constexpr size_t kMaxEntries = 24;

uint64_t bucket(uint64_t bytes) {  // slot size: block tables grow without changing the signature
  uint64_t b = 64;
  while (b < bytes) b *= 2;
  return b;
}

// Signature writer: every word goes into sig and the hash; shape words also into the topology
// hash (pointers and staging offsets do not change a graph's topology).
struct SigWriter {
  std::vector<uint64_t>& sig;
  uint64_t hash = 1469598103934665603ull, topo = 1469598103934665603ull;
  void put(uint64_t w, bool shape) {
    sig.push_back(w);
    hash = (hash ^ w) * 1099511628211ull;
    if (shape) topo = (topo ^ w) * 1099511628211ull;
  }
  void ptr(const void* p) { put(reinterpret_cast<uintptr_t>(p), false); }
  void f32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    put(u, false);
  }
  void view(const TensorView& v) {
    ptr(v.data);
    put(uint64_t(v.dtype) | uint64_t(v.device) << 8, true);
    for (int64_t n : v.ne) put(uint64_t(n), true);
    put(uint64_t(v.row_stride), true);
  }
  void array(std::span<const int32_t> a, const std::byte* arena) {
    put(a.empty() ? ~0ull : uint64_t(reinterpret_cast<const std::byte*>(a.data()) - arena), false);
    put(bucket(a.size_bytes()), false);
  }
};

void write_call(SigWriter& w, const Call& c, const std::byte* arena) {
  w.put(uint64_t(c.verb), true);
  switch (c.verb) {
    case Verb::kEmbed: w.view(c.out); w.view(c.a); w.f32(c.f); w.put(c.i[0].size(), true); w.array(c.i[0], arena); break;
    case Verb::kEmbedIds: w.view(c.out); w.view(c.a); w.view(c.b); w.f32(c.f); break;
    case Verb::kMatmul: w.view(c.out); w.view(c.a); w.view(c.b); w.view(c.c); break;
    case Verb::kRmsNorm: w.view(c.out); w.view(c.a); w.view(c.b); w.f32(c.f); break;
    case Verb::kGatedActivation: w.view(c.out); w.view(c.a); w.view(c.b); w.put(uint64_t(c.act), true); break;
    case Verb::kAddScaled: w.view(c.out); w.view(c.a); w.view(c.b); w.f32(c.f); break;
    case Verb::kScale: w.view(c.out); w.f32(c.f); break;
    case Verb::kLayerNorm: w.view(c.out); w.view(c.a); w.view(c.b); w.view(c.c); w.f32(c.f); break;
    case Verb::kActivation: w.view(c.out); w.view(c.a); w.put(uint64_t(c.act), true); break;
    case Verb::kRope:
      w.view(c.out);
      w.put(c.i[0].size(), true);
      w.array(c.i[0], arena);
      w.put(uint64_t(c.rope.kind) | uint64_t(uint32_t(c.rope.n_rot)) << 8, true);
      w.f32(c.rope.freq_base);
      w.f32(c.rope.freq_scale);
      w.ptr(c.rope.freq_factors);
      break;
    case Verb::kKvStore:
      w.view(c.layer.k); w.view(c.layer.v); w.put(uint64_t(c.layer.block_size), true);
      w.view(c.a); w.view(c.b); w.put(c.i[0].size(), true); w.array(c.i[0], arena);
      break;
    case Verb::kAttention:
      w.view(c.out); w.view(c.a);
      w.view(c.layer.k); w.view(c.layer.v); w.put(uint64_t(c.layer.block_size), true);
      w.put(uint64_t(uint32_t(c.attn.n_head)) | uint64_t(uint32_t(c.attn.n_head_kv)) << 32, true);
      w.put(uint64_t(uint32_t(c.attn.head_dim)) | uint64_t(uint32_t(c.attn.sliding_window)) << 32, true);
      w.f32(c.attn.scale); w.f32(c.attn.softcap); w.put(uint64_t(c.attn.causal), true);
      w.put(c.i[0].size(), true);
      w.put(c.i[3].size(), true);
      for (const auto& a : c.i) w.array(a, arena);
      break;
    case Verb::kShortConv: w.view(c.out); w.view(c.a); w.view(c.b); w.view(c.c); break;
    case Verb::kMoeRoute:
      w.view(c.out); w.view(c.a); w.view(c.b); w.view(c.c);
      w.put(uint64_t(uint32_t(c.router.n_expert_used)) | uint64_t(c.router.gating) << 32 |
                uint64_t(c.router.normalize) << 40, true);
      w.f32(c.router.scale);
      break;
    case Verb::kMatmulExperts: w.view(c.out); w.view(c.a); w.view(c.b); w.view(c.c); break;
    case Verb::kMoeCombine: w.view(c.out); w.view(c.a); w.view(c.b); break;
    case Verb::kTopK: w.view(c.out); w.view(c.a); w.view(c.b); w.view(c.c); w.f32(c.f); w.put(uint64_t(c.n), true); break;
    case Verb::kMaskLogits:
      w.view(c.out); w.put(c.i[1].size(), true); w.array(c.i[0], arena); w.array(c.i[1], arena);
      break;
    case Verb::kAllReduce: w.view(c.out); w.ptr(c.comm); break;
    case Verb::kEmbedSlice: w.view(c.out); w.view(c.a); w.f32(c.f); w.put(c.i[0].size(), true); w.array(c.i[0], arena); break;
    case Verb::kAllGatherCols: w.view(c.out); w.view(c.a); w.view(c.b); w.ptr(c.comm); break;
  }
}

// CERA_CUDA_SKIP=matmul,attention,...: verbs left out of captured graphs. A benchmark knob that
// places time inside a replayed decode step (a run without a verb minus the full run is that verb's
// share, its gaps included); the results are wrong while it is set.
bool skipped(Verb v) {
  static const uint32_t mask = [] {
    const char* e = std::getenv("CERA_CUDA_SKIP");
    if (e == nullptr) return 0u;
    static constexpr std::pair<const char*, Verb> kNames[] = {
        {"embed", Verb::kEmbed}, {"embed_ids", Verb::kEmbedIds}, {"matmul", Verb::kMatmul},
        {"rms_norm", Verb::kRmsNorm}, {"rope", Verb::kRope}, {"gated_activation", Verb::kGatedActivation},
        {"add_scaled", Verb::kAddScaled}, {"scale", Verb::kScale},
        {"kv_store", Verb::kKvStore}, {"attention", Verb::kAttention}, {"top_k", Verb::kTopK},
        {"mask_logits", Verb::kMaskLogits}};
    uint32_t m = 0;
    const std::string list = std::string(",") + e + ",";
    for (const auto& [name, verb] : kNames) {
      if (list.find(std::string(",") + name + ",") != std::string::npos) m |= 1u << uint32_t(verb);
    }
    return m;
  }();
  return (mask >> uint32_t(v)) & 1u;
}

}  // namespace

void execute(CudaContext& ctx, const Call& c) {
  // Only the matmuls leave the quantized-activation cache valid (they check their own output).
  if (c.verb != Verb::kMatmul && c.verb != Verb::kMatmulExperts) ctx.act_cache() = {};
  switch (c.verb) {
    case Verb::kEmbed: embed(ctx, c.out, c.a, c.i[0], c.f); break;
    case Verb::kEmbedIds: embed_ids(ctx, c.out, c.a, c.b, c.f); break;
    case Verb::kMatmul: matmul(ctx, c.out, c.a, c.b, c.c.data != nullptr ? &c.c : nullptr); break;
    case Verb::kRmsNorm: rms_norm(ctx, c.out, c.a, c.b, c.f); break;
    case Verb::kRope: rope(ctx, c.out, c.i[0], c.rope); break;
    case Verb::kGatedActivation: gated_activation(ctx, c.out, c.a, c.b, c.act); break;
    case Verb::kAddScaled: add_scaled(ctx, c.out, c.a, c.b, c.f); break;
    case Verb::kScale: scale(ctx, c.out, c.f); break;
    case Verb::kLayerNorm: layer_norm(ctx, c.out, c.a, c.b, c.c, c.f); break;
    case Verb::kActivation: activation(ctx, c.out, c.a, c.act); break;
    case Verb::kKvStore: kv_store(ctx, c.layer, c.a, c.b, c.i[0]); break;
    case Verb::kAttention:
      attention(ctx, c.out, c.a, c.layer, AttentionBatch{c.i[0], c.i[1], c.i[2], c.i[3]}, c.attn);
      break;
    case Verb::kShortConv: short_conv(ctx, c.out, c.a, c.b, c.c); break;
    case Verb::kMoeRoute: {
      RouterParams r = c.router;
      r.selection_bias = c.c.data != nullptr ? &c.c : nullptr;
      moe_route(ctx, c.out, c.a, c.b, r);
      break;
    }
    case Verb::kMatmulExperts: matmul_experts(ctx, c.out, c.a, c.b, c.c); break;
    case Verb::kMoeCombine: moe_combine(ctx, c.out, c.a, c.b); break;
    case Verb::kTopK: top_k(ctx, c.out, c.b, c.c, c.a, TopKParams{.k = c.n, .softcap = c.f}); break;
    case Verb::kMaskLogits:
      mask_logits(ctx, c.out, std::span(reinterpret_cast<const uint32_t*>(c.i[0].data()), c.i[0].size()), c.i[1]);
      break;
    case Verb::kAllReduce: nccl_all_reduce(ctx, c.out, c.comm); break;
    case Verb::kEmbedSlice: embed_rows_or_zero(ctx, c.out, c.a, c.i[0], c.f); break;
    case Verb::kAllGatherCols: nccl_all_gather_cols(ctx, c.out, c.a, c.b, c.comm); break;
  }
}

GraphRunner::GraphRunner(CudaContext& ctx, bool enabled) : ctx_(ctx), enabled_(enabled) {
  if (VerbProfiler::requested()) {
    profiler_ = std::make_unique<VerbProfiler>(ctx_.stream());
    enabled_ = false;  // profiles time eager verbs
  }
  if (!enabled_) return;
  CERA_CUDA_CHECK(cudaMallocHost(&arena_host_, kArenaBytes));
  CERA_CUDA_CHECK(cudaMalloc(&arena_device_, kArenaBytes));
  for (cudaEvent_t& e : half_done_) CERA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ctx_.set_graph_arena(arena_host_, kArenaBytes, arena_device_);
  epoch_ = ctx_.scratch_epoch();
}

GraphRunner::~GraphRunner() {
  // Destructors must not throw: errors are ignored while the device is torn down.
  cudaStreamSynchronize(ctx_.stream());
  clear_entries();
  for (cudaEvent_t e : half_done_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  cudaFreeHost(arena_host_);
  cudaFree(arena_device_);
}

void GraphRunner::clear_entries() {
  for (Entry& e : entries_) cudaGraphExecDestroy(e.exec);  // in-flight launches finish first
  entries_.clear();
}

bool GraphRunner::recordable(const Call& c) const {
  // Serving batches are recorded: gemm_rows and the GEMVs (a step of 64 rows is ~450 launches,
  // whose host cost eagerly was as large as the step's device time, and replay fuses the norms,
  // adds and RoPE around the matmuls), and the prompt path (cuBLAS on f16 copies, its own
  // workspace) up to graphed_gemm_rows() rows, where the decode steps of 129-256 rows go (off by
  // default: cuda_ops.h). Longer prompt chunks run eagerly: GPU-bound, and each size would be a
  // graph of its own.
  if (c.verb == Verb::kMatmul) {
    return matmul_path(c.a, c.b.rows()) != MatmulPath::kPrefill || gemm_recordable(c.a, c.b.rows());
  }
  const int64_t graphed_rows = std::max({kGemvMaxTokens, rows_max(), graphed_gemm_rows()});
  if (c.verb == Verb::kEmbed || c.verb == Verb::kEmbedSlice) return int64_t(c.i[0].size()) <= graphed_rows;
  if (c.verb == Verb::kEmbedIds) return c.b.n_elements() <= graphed_rows;
  // Prompt batches group their rows by expert first; they run eagerly like the large matmuls.
  if (c.verb == Verb::kMatmulExperts) return c.c.rows() <= kGemvMaxTokens;
  return true;
}

uint64_t GraphRunner::half_base() const { return uint64_t(half_) * kHalfBytes; }

const std::byte* GraphRunner::stage_bytes(const void* p, uint64_t bytes, bool& ok) {
  for (const Staged& s : staged_) {
    if (s.src == p && s.bytes == bytes && std::memcmp(arena_host_ + s.offset, p, bytes) == 0) {
      return arena_host_ + s.offset;
    }
  }
  const uint64_t size = bucket(bytes);
  if (arena_pos_ + size > kHalfBytes) {
    ok = false;
    return nullptr;
  }
  if (arena_pos_ == 0 && half_unsynced_[half_]) {
    // The last launch that used this half may still read it: wait for that one only. After a
    // synchronising download it has finished; in pipelined decode it is the step before the one
    // running now, whose token the host has already read back.
    CERA_CUDA_CHECK(cudaEventSynchronize(half_done_[half_]));
    half_unsynced_[half_] = false;
  }
  const uint64_t offset = half_base() + arena_pos_;
  std::byte* dst = arena_host_ + offset;
  std::memcpy(dst, p, bytes);
  staged_.push_back({p, bytes, offset});
  arena_pos_ += size;
  return dst;
}

std::span<const int32_t> GraphRunner::stage_array(std::span<const int32_t> a, bool& ok) {
  if (a.empty() || !ok) return {};
  const std::byte* p = stage_bytes(a.data(), a.size_bytes(), ok);
  return ok ? std::span(reinterpret_cast<const int32_t*>(p), a.size()) : std::span<const int32_t>{};
}

bool GraphRunner::stage(Call& c) {
  bool ok = true;
  for (auto& a : c.i) a = stage_array(a, ok);
  if (c.verb == Verb::kRope && c.rope.freq_factors != nullptr && ok) {
    c.rope.freq_factors =
        reinterpret_cast<const float*>(stage_bytes(c.rope.freq_factors, uint64_t(c.rope.n_rot / 2) * 4, ok));
  }
  return ok;
}

void GraphRunner::run(const Call& call) {
  if (enabled_ && segment_ == Segment::kNone) segment_ = recordable(call) ? Segment::kRecord : Segment::kEager;
  if (segment_ == Segment::kRecord && !recordable(call)) {
    flush();
    segment_ = Segment::kEager;
  }
  if (!enabled_ || segment_ == Segment::kEager) {
    if (profiler_) profiler_->begin(call);
    execute(ctx_, call);
    if (profiler_) profiler_->end();
    return;
  }
  Call c = call;
  const uint64_t pos = arena_pos_;
  const size_t n_staged = staged_.size();
  if (!stage(c)) {  // arena full: launch what is logged, run the rest of the segment eagerly
    arena_pos_ = pos;
    staged_.resize(n_staged);
    flush();
    segment_ = Segment::kEager;
    execute(ctx_, call);
    return;
  }
  const HostTimer timer(stats_.record_seconds);
  ctx_.set_mode(OpMode::kRecord);
  try {
    execute(ctx_, c);  // validation only
  } catch (...) {
    ctx_.set_mode(OpMode::kEager);
    arena_pos_ = pos;
    staged_.resize(n_staged);
    throw;
  }
  ctx_.set_mode(OpMode::kEager);
  log_.push_back(c);
}

cudaGraph_t GraphRunner::capture() {
  ctx_.act_cache() = {};  // a replay must not depend on what the device held before it
  CERA_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream(), cudaStreamCaptureModeThreadLocal));
  ctx_.set_mode(OpMode::kCapture);
  try {
    if (arena_pos_ > 0) {
      CERA_CUDA_CHECK(cudaMemcpyAsync(arena_device_ + half_base(), arena_host_ + half_base(), arena_pos_,
                                      cudaMemcpyHostToDevice, ctx_.stream()));
    }
    const std::span<const Call> calls(log_);
    for (size_t i = 0; i < calls.size();) {
      if (skipped(calls[i].verb)) {
        ++i;
        continue;
      }
      const size_t n = run_fused(ctx_, calls, i);
      if (n == 0) execute(ctx_, calls[i]);
      i += std::max<size_t>(n, 1);
    }
  } catch (...) {
    ctx_.set_mode(OpMode::kEager);
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(ctx_.stream(), &g);
    if (g != nullptr) cudaGraphDestroy(g);
    cudaGetLastError();
    throw;
  }
  ctx_.set_mode(OpMode::kEager);
  cudaGraph_t graph = nullptr;
  CERA_CUDA_CHECK(cudaStreamEndCapture(ctx_.stream(), &graph));
  ++stats_.captures;
  return graph;
}

GraphRunner::Entry& GraphRunner::install(cudaGraph_t graph, uint64_t hash, uint64_t topo, std::vector<uint64_t>&& sig) {
  Entry* slot = nullptr;
  for (Entry& e : entries_) {
    if (e.topo == topo) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(e.exec, graph, &info) == cudaSuccess) {
        ++stats_.updates;
        slot = &e;
      } else {
        cudaGetLastError();  // topology differs after all: re-instantiate in this slot
        cudaGraphExecDestroy(e.exec);
        e.exec = nullptr;
        slot = &e;
      }
      break;
    }
  }
  if (slot == nullptr) {
    if (entries_.size() >= kMaxEntries) {
      auto lru = std::min_element(entries_.begin(), entries_.end(),
                                  [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
      cudaGraphExecDestroy(lru->exec);
      entries_.erase(lru);
    }
    slot = &entries_.emplace_back();
  }
  if (slot->exec == nullptr) {
    const cudaError_t err = cudaGraphInstantiate(&slot->exec, graph, 0);
    if (err != cudaSuccess) {
      entries_.erase(entries_.begin() + (slot - entries_.data()));
      cudaGraphDestroy(graph);
      CERA_CUDA_CHECK(err);
    }
    ++stats_.instantiations;
  }
  cudaGraphDestroy(graph);
  slot->hash = hash;
  slot->topo = topo;
  slot->sig = std::move(sig);
  return *slot;
}

void GraphRunner::flush() {
  segment_ = Segment::kNone;
  if (log_.empty()) return;
  const HostTimer timer(stats_.flush_seconds);
  if (ctx_.scratch_epoch() != epoch_) {  // scratch moved: every cached graph points at freed memory
    clear_entries();
    epoch_ = ctx_.scratch_epoch();
  }
  sig_.clear();
  SigWriter w{sig_};
  w.put(uint64_t(half_), true);  // a graph for each arena part, each replayed as it is
  w.put(arena_pos_, false);
  for (const Call& c : log_) write_call(w, c, arena_host_);
  Entry* hit = nullptr;
  for (Entry& e : entries_) {
    if (e.hash == w.hash && e.sig == sig_) {
      hit = &e;
      break;
    }
  }
  try {
    if (hit == nullptr) {
      cudaGraph_t graph = capture();
      hit = &install(graph, w.hash, w.topo, std::vector<uint64_t>(sig_));
    }
    hit->last_use = ++use_clock_;
    CERA_CUDA_CHECK(cudaGraphLaunch(hit->exec, ctx_.stream()));
    CERA_CUDA_CHECK(cudaEventRecord(half_done_[half_], ctx_.stream()));
  } catch (...) {
    log_.clear();
    staged_.clear();
    arena_pos_ = 0;
    throw;
  }
  ++stats_.launches;
  half_unsynced_[half_] = true;
  half_ = (half_ + 1) % kArenaSlots;  // the next log stages into the next part while this graph runs
  ctx_.act_cache() = {};
  log_.clear();
  staged_.clear();
  arena_pos_ = 0;
}

}  // namespace cera::ops::cuda
