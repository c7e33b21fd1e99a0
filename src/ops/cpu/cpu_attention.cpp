// The paged KV verbs: kv_store, attention, kv_copy, kv_rerotate. Validation and the mapping of
// (token, kv head) units to the thread pool live here; the flash-style inner loop is the kernel
// table's (attention_impl.inc, one copy per ISA level). Cache rows are F32 or F16 (KvLayer k and v
// of one type): F16 rows are written rounded to nearest even and read back as float, so every
// verb's math stays float32.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/cpu/cpu_context.h"

namespace cera::ops::cpu {
namespace {

void check_layer(const KvLayer& layer) {
  CERA_CHECK_MSG(layer.k.device == Device::kCpu && layer.v.device == Device::kCpu, "kv layer: not CPU tensors");
  CERA_CHECK_MSG(layer.k.dtype == layer.v.dtype && (layer.k.dtype == DType::kF32 || layer.k.dtype == DType::kF16),
                 "kv layer: K and V must both be F32 or both F16, got " + std::string(dtype_name(layer.k.dtype)) +
                     " and " + std::string(dtype_name(layer.v.dtype)));
  CERA_CHECK_MSG((layer.k.data != nullptr && layer.v.data != nullptr) || layer.k.n_elements() == 0,
                 "kv layer: null data");
  CERA_CHECK(layer.k.cols() == layer.v.cols() && layer.k.rows() == layer.v.rows());
  CERA_CHECK(layer.block_size > 0);
}

// Writes float row `src` (n values) into cache row `dst` of type `dtype`.
void put_row(const KernelTable& kt, DType dtype, std::byte* dst, const float* src, int64_t n) {
  if (dtype == DType::kF16) {
    kt.f32_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
}

void check_slot(const KvLayer& layer, int32_t slot) {
  CERA_CHECK_MSG(slot >= 0 && slot < layer.k.rows(), "kv slot " + std::to_string(slot) + " out of range");
}

// Head h of token t in a [head_dim, n_head, n_tokens] or [n_head * head_dim, n_tokens] view whose
// heads are contiguous within a token.
float* head_of(const TensorView& v, int64_t t, int64_t h, int64_t head_dim, int64_t n_head) {
  if (v.cols() == head_dim) return v.row_as<float>(t * n_head + h);
  return v.row_as<float>(t) + h * head_dim;
}

void check_heads(const TensorView& v, int64_t head_dim, int64_t n_head, int64_t n_tokens,
                 const char* what) {
  check_f32_cpu(v, what);
  const bool per_head = v.cols() == head_dim && v.rows() == n_head * n_tokens &&
                        (n_head == 1 || v.packed());
  const bool per_token = v.cols() == n_head * head_dim && v.rows() == n_tokens;
  CERA_CHECK_MSG(per_head || per_token, std::string(what) + ": expected [head_dim, n_head, n_tokens]");
}

}  // namespace

void kv_store(CpuContext& ctx, const KvLayer& layer, const TensorView& k, const TensorView& v,
              std::span<const int32_t> slots) {
  check_layer(layer);
  check_f32_cpu(k, "kv_store k");
  check_f32_cpu(v, "kv_store v");
  const auto n = static_cast<int64_t>(slots.size());
  CERA_CHECK(k.cols() == layer.k.cols() && k.rows() == n);
  CERA_CHECK(v.cols() == layer.v.cols() && v.rows() == n);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t s = slots[static_cast<size_t>(t)];
    check_slot(layer, s);
    put_row(*ctx.kernels, layer.k.dtype, layer.k.row(s), k.row_as<const float>(t), k.cols());
    put_row(*ctx.kernels, layer.v.dtype, layer.v.row(s), v.row_as<const float>(t), v.cols());
  }
}

void attention(CpuContext& ctx, const TensorView& out, const TensorView& q, const KvLayer& layer,
               const AttentionBatch& batch, const AttentionParams& p) {
  check_layer(layer);
  CERA_CHECK(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0 && p.head_dim > 0);
  CERA_CHECK_MSG(layer.k.cols() == static_cast<int64_t>(p.n_head_kv) * p.head_dim,
                 "attention: cache rows are not n_head_kv * head_dim");
  const auto n_tokens = static_cast<int64_t>(batch.positions.size());
  CERA_CHECK(batch.token_seq.size() == batch.positions.size());
  CERA_CHECK_MSG(p.causal || p.sliding_window == 0, "attention: a sliding window needs causal attention");
  // Bidirectional: each token's last visible entry is its sequence's last position (validated
  // below like the positions themselves).
  std::vector<int32_t> last;
  if (!p.causal) last = bidirectional_last(batch);
  const std::span<const int32_t> last_of = p.causal ? batch.positions : std::span<const int32_t>(last);
  check_heads(q, p.head_dim, p.n_head, n_tokens, "attention q");
  check_heads(out, p.head_dim, p.n_head, n_tokens, "attention out");
  const auto n_seqs = static_cast<int64_t>(batch.table_offset.size()) - 1;
  CERA_CHECK(n_seqs >= 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t seq = batch.token_seq[static_cast<size_t>(t)];
    const int32_t pos = last_of[static_cast<size_t>(t)];
    CERA_CHECK_MSG(seq >= 0 && seq < n_seqs, "attention: token_seq out of range");
    const int32_t t0 = batch.table_offset[static_cast<size_t>(seq)];
    const int32_t t1 = batch.table_offset[static_cast<size_t>(seq) + 1];
    CERA_CHECK(t0 >= 0 && t0 <= t1 && t1 <= static_cast<int64_t>(batch.block_tables.size()));
    CERA_CHECK_MSG(pos >= 0 && pos / layer.block_size < t1 - t0,
                   "attention: position beyond the sequence's block table");
    for (int32_t b = t0; b <= t0 + pos / layer.block_size; ++b) {
      const int32_t blk = batch.block_tables[static_cast<size_t>(b)];
      CERA_CHECK_MSG(blk >= 0 && (static_cast<int64_t>(blk) + 1) * layer.block_size <= layer.k.rows(),
                     "attention: block id out of range");
    }
  }
  AttentionArgs args;
  args.k = layer.k.data;
  args.v = layer.v.data;
  args.k_stride = layer.k.stride();
  args.v_stride = layer.v.stride();
  args.block_size = layer.block_size;
  args.head_dim = p.head_dim;
  args.scale = p.scale;
  args.softcap = p.softcap;
  const int32_t n_group = p.n_head / p.n_head_kv;
  const AttentionFn fn = layer.k.dtype == DType::kF16 ? ctx.kernels->attention_f16 : ctx.kernels->attention;
  ctx.pool.parallel_for(n_tokens * p.n_head_kv, 1, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t t = unit / p.n_head_kv;
      const auto kvh = static_cast<int32_t>(unit % p.n_head_kv);
      const int32_t pos = last_of[static_cast<size_t>(t)];
      const int32_t seq = batch.token_seq[static_cast<size_t>(t)];
      AttentionUnit u;
      u.q = head_of(q, t, static_cast<int64_t>(kvh) * n_group, p.head_dim, p.n_head);
      u.out = head_of(out, t, static_cast<int64_t>(kvh) * n_group, p.head_dim, p.n_head);
      u.n_group = n_group;
      u.kv_head = kvh;
      u.last = pos;
      u.first = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      u.table = batch.block_tables.data() + batch.table_offset[static_cast<size_t>(seq)];
      fn(args, u);
    }
  });
}

void kv_copy(CpuContext&, const KvLayer& layer, std::span<const int32_t> src_slots,
             std::span<const int32_t> dst_slots) {
  check_layer(layer);
  CERA_CHECK(src_slots.size() == dst_slots.size());
  const auto bytes = static_cast<size_t>(layer.k.row_bytes());
  for (size_t i = 0; i < src_slots.size(); ++i) {
    check_slot(layer, src_slots[i]);
    check_slot(layer, dst_slots[i]);
    if (src_slots[i] == dst_slots[i]) continue;
    std::memcpy(layer.k.row(dst_slots[i]), layer.k.row(src_slots[i]), bytes);
    std::memcpy(layer.v.row(dst_slots[i]), layer.v.row(src_slots[i]), bytes);
  }
}

void kv_rerotate(CpuContext& ctx, const KvLayer& layer, std::span<const int32_t> slots,
                 int32_t delta, int32_t head_dim, const RopeParams& params) {
  check_layer(layer);
  CERA_CHECK(head_dim > 0 && layer.k.cols() % head_dim == 0 && params.n_rot <= head_dim);
  for (int32_t s : slots) check_slot(layer, s);
  if (slots.empty()) return;
  // F16 rows are rotated in float: converted into a scratch copy, rotated, rounded back.
  const bool f16 = layer.k.dtype == DType::kF16;
  const int64_t width = layer.k.cols();
  std::vector<float> rows(f16 ? slots.size() * static_cast<size_t>(width) : 0);
  if (f16) {
    for (size_t t = 0; t < slots.size(); ++t) {
      const auto* src = layer.k.row_as<const uint16_t>(slots[t]);
      for (int64_t i = 0; i < width; ++i) rows[t * static_cast<size_t>(width) + static_cast<size_t>(i)] = half_to_float(src[i]);
    }
  }
  // Every slot turns by the same angle: one position (delta) repeated per slot.
  struct Ctx {
    const KvLayer* layer;
    std::span<const int32_t> slots;
    int32_t head_dim;
    float* rows;  // F16: the scratch copy, [width, n_slots]
    int64_t width;
  } hc{&layer, slots, head_dim, f16 ? rows.data() : nullptr, width};
  const int64_t n_heads = layer.k.cols() / head_dim;
  // Context shift is rare and off the decode path, so a small allocation here is fine.
  std::vector<int32_t> positions(slots.size(), delta);
  rope_heads(ctx, positions, n_heads, params, [](const void* c, int64_t t, int64_t h) {
    const auto* hc = static_cast<const Ctx*>(c);
    if (hc->rows != nullptr) return hc->rows + t * hc->width + h * hc->head_dim;
    return hc->layer->k.row_as<float>(hc->slots[static_cast<size_t>(t)]) + h * hc->head_dim;
  }, &hc);
  if (f16) {
    for (size_t t = 0; t < slots.size(); ++t) {
      put_row(*ctx.kernels, DType::kF16, layer.k.row(slots[t]), rows.data() + t * static_cast<size_t>(width), width);
    }
  }
}

}  // namespace cera::ops::cpu
