// State shared by the CPU backend's verbs (thread pool, chosen kernel table, scratch that grows
// to the largest call and is then reused) and the verb entry points, one group per file:
// cpu_matmul.cpp, cpu_elementwise.cpp, cpu_attention.cpp. Internal to src/ops/cpu.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ops/backend.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/kernels.h"

namespace cera::ops::cpu {

// The weights import_weight repacked into the R16 layout (repack.h), by the data pointer of the
// view it returned. Shared with the buffers holding them, which unregister when freed (so a
// later allocation at the same address is never mistaken for a repacked weight).
struct R16Weight {
  DType type;
  int64_t n_in;
  int64_t n_out;
};
class R16Registry {
 public:
  void add(const std::byte* data, R16Weight w) {
    std::lock_guard lock(mu_);
    map_[data] = w;
  }
  void remove(const std::byte* data) {
    std::lock_guard lock(mu_);
    map_.erase(data);
  }
  // The entry for a view whose data pointer is `data`, or false.
  bool find(const std::byte* data, R16Weight& out) {
    std::lock_guard lock(mu_);
    const auto it = map_.find(data);
    if (it == map_.end()) return false;
    out = it->second;
    return true;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const std::byte*, R16Weight> map_;
};

struct CpuContext {
  CpuContext(int n_threads, CpuIsa isa_level, const KernelTable& table,
             ActivationPrecision act = ActivationPrecision::kInt8x2)
      : pool(n_threads), isa(isa_level), kernels(&table), activations(act) {}
  ThreadPool pool;
  CpuIsa isa;
  const KernelTable* kernels;
  ActivationPrecision activations;  // of matmul and matmul_experts
  std::shared_ptr<R16Registry> r16 = std::make_shared<R16Registry>();
  // Scratch; grown on demand, never shrunk (a Backend is used by one thread at a time).
  std::vector<std::byte> act_rows;  // quantized activation rows of a matmul
  std::vector<float> act_d;         // Q8_0 block scales as float
  std::vector<int32_t> act_sum;     // Q8_0 block code sums
  std::vector<float> rope_cs;       // cos/sin per (token, pair)
  std::vector<float> gemm_x;        // activations packed for the float GEMM (KernelTable::gemm_pack)
};

// Checks shared by the verbs.
void check_f32_cpu(const TensorView& v, const char* what);

// Quantizes one activation row to `act_type` (F32: a copy; Q8_0 or Q8_K) as `terms` rows at dst (the codes,
// then with terms == 2 the residual's codes, row_bytes apart); Q8_0 rows also get their block
// scales and code sums at d and sum (n_in / 32 per row, rows consecutive). Shared by matmul and
// matmul_experts so both honour CpuContext::activations.
void quantize_activation_terms(const KernelTable& k, DType act_type, int terms, const float* src, int64_t n_in,
                               std::byte* dst, int64_t row_bytes, float* d, int32_t* sum);

void matmul(CpuContext& ctx, const TensorView& out, const TensorView& weight, const TensorView& x,
            const TensorView* bias);
void embed(CpuContext& ctx, const TensorView& out, const TensorView& table,
           std::span<const int32_t> tokens, float scale);

void rms_norm(CpuContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight,
              float eps);
void rope(CpuContext& ctx, const TensorView& x, std::span<const int32_t> positions,
          const RopeParams& params);
void layer_norm(CpuContext& ctx, const TensorView& out, const TensorView& x, const TensorView& weight,
                const TensorView& bias, float eps);
void activation(CpuContext& ctx, const TensorView& out, const TensorView& x, Activation act);
void gated_activation(CpuContext& ctx, const TensorView& out, const TensorView& gate,
                      const TensorView& up, Activation act);
void add_scaled(CpuContext& ctx, const TensorView& out, const TensorView& a, const TensorView& b,
                float scale);
void scale(CpuContext& ctx, const TensorView& x, float s);
// Rotates head vectors in place: head h of token t is at head_ptr(head_ctx, t, h), token t at
// positions[t]. Shared by rope (activations) and kv_rerotate (cache rows).
using HeadPtrFn = float* (*)(const void* head_ctx, int64_t token, int64_t head);
void rope_heads(CpuContext& ctx, std::span<const int32_t> positions, int64_t n_heads,
                const RopeParams& params, HeadPtrFn head_ptr, const void* head_ctx);

void kv_store(CpuContext& ctx, const KvLayer& layer, const TensorView& k, const TensorView& v,
              std::span<const int32_t> slots);
void attention(CpuContext& ctx, const TensorView& out, const TensorView& q, const KvLayer& layer,
               const AttentionBatch& batch, const AttentionParams& params);
void kv_copy(CpuContext& ctx, const KvLayer& layer, std::span<const int32_t> src_slots,
             std::span<const int32_t> dst_slots);
void kv_rerotate(CpuContext& ctx, const KvLayer& layer, std::span<const int32_t> slots,
                 int32_t delta, int32_t head_dim, const RopeParams& params);

}  // namespace cera::ops::cpu
