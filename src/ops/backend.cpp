// Default bodies: the optional verbs (a backend that lacks one says so at the call, but models
// check Backend::supports() at load time, so reaching these is a programming error), and top_k on
// the host for backends without a device selection, copy and embed_ids through the host, and
// download_async as a plain download.
#include "ops/backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/top_k.h"

namespace cera::ops {
namespace {
[[noreturn]] void missing(const Backend& b, const char* verb) {
  check_failed("backend supports the verb", std::string(verb) + " is not implemented by " + b.name(), __FILE__,
               __LINE__);
}
}  // namespace

std::vector<int32_t> bidirectional_last(const AttentionBatch& batch) {
  const size_t n_seqs = batch.table_offset.empty() ? 0 : batch.table_offset.size() - 1;
  std::vector<int32_t> seq_last(n_seqs, 0);
  for (size_t t = 0; t < batch.positions.size(); ++t) {
    const int32_t seq = batch.token_seq[t];
    CERA_CHECK_MSG(seq >= 0 && static_cast<size_t>(seq) < n_seqs, "attention: token_seq out of range");
    seq_last[static_cast<size_t>(seq)] = std::max(seq_last[static_cast<size_t>(seq)], batch.positions[t]);
  }
  std::vector<int32_t> last(batch.positions.size());
  for (size_t t = 0; t < last.size(); ++t) last[t] = seq_last[static_cast<size_t>(batch.token_seq[t])];
  return last;
}

void Backend::short_conv(const TensorView&, const TensorView&, const TensorView&, const TensorView&) {
  missing(*this, "short_conv");
}
void Backend::moe_route(const TensorView&, const TensorView&, const TensorView&, const RouterParams&) {
  missing(*this, "moe_route");
}
void Backend::matmul_experts(const TensorView&, const TensorView&, const TensorView&, const TensorView&) {
  missing(*this, "matmul_experts");
}
void Backend::moe_combine(const TensorView&, const TensorView&, const TensorView&) { missing(*this, "moe_combine"); }

}  // namespace cera::ops

namespace cera::ops {

void Backend::copy(const TensorView& dst, const TensorView& src) {
  CERA_CHECK(dst.dtype == src.dtype && dst.ne == src.ne);
  std::vector<std::byte> host(static_cast<size_t>(src.row_bytes() * src.rows()));
  download(host.data(), src);
  upload(dst, host.data());
}

Readback Backend::download_async(void* dst, const TensorView& src) {
  download(dst, src);
  return {};
}

void Backend::wait(Readback) {}

void Backend::embed_ids(const TensorView& out, const TensorView& table, const TensorView& ids, float scale) {
  CERA_CHECK_MSG(ids.dtype == DType::kI32 && ids.n_elements() == out.rows(), "embed_ids: ids must be I32 [n_tokens]");
  std::vector<int32_t> host(static_cast<size_t>(ids.n_elements()));
  download(host.data(), ids);
  embed(out, table, host, scale);
}

void Backend::embed_slice(const TensorView& out, const TensorView& table, std::span<const int32_t> tokens,
                          int64_t first, float scale) {
  const int64_t count = table.rows();
  auto held = [&](int32_t t) { return t >= first && t < first + count; };
  std::vector<int32_t> local(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) local[i] = held(tokens[i]) ? static_cast<int32_t>(tokens[i] - first) : 0;
  embed(out, table, local, scale);
  const std::vector<float> zeros(static_cast<size_t>(out.cols()) * tokens.size(), 0.0f);
  for (size_t i = 0; i < tokens.size();) {  // runs of tokens another rank holds
    if (held(tokens[i])) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < tokens.size() && !held(tokens[end])) ++end;
    upload(out.slice_rows(static_cast<int64_t>(i), static_cast<int64_t>(end - i)), zeros.data());
    i = end;
  }
}

void Backend::top_k(const TensorView& ids, const TensorView& values, const TensorView& lse, const TensorView& logits,
                    const TopKParams& params) {
  const int64_t n_vocab = logits.cols(), n_rows = logits.rows(), k = params.k;
  CERA_CHECK(logits.dtype == DType::kF32 && ids.dtype == DType::kI32 && values.dtype == DType::kF32 &&
             lse.dtype == DType::kF32);
  CERA_CHECK(k >= 1 && k <= n_vocab && k <= TopKParams::kMaxTopK);
  CERA_CHECK(ids.cols() == k && ids.rows() == n_rows && values.cols() == k && values.rows() == n_rows &&
             lse.n_elements() == n_rows);
  std::vector<float> host(static_cast<size_t>(n_vocab * n_rows));
  download(host.data(), logits);
  std::vector<int32_t> out_ids(static_cast<size_t>(k * n_rows));
  std::vector<float> out_values(out_ids.size()), out_lse(static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    out_lse[r] = select_top_k(std::span(host).subspan(r * n_vocab, n_vocab), params,
                              std::span(out_ids).subspan(r * k, k), std::span(out_values).subspan(r * k, k));
  }
  upload(ids, out_ids.data());
  upload(values, out_values.data());
  upload(lse, out_lse.data());
}

namespace {
void apply_masks(float* logits, int64_t n_vocab, std::span<const uint32_t> masks, std::span<const int32_t> rows) {
  const size_t n_words = static_cast<size_t>((n_vocab + 31) / 32);
  for (size_t i = 0; i < rows.size(); ++i) {
    float* row = logits + rows[i] * n_vocab;
    const uint32_t* mask = masks.data() + i * n_words;
    for (size_t w = 0; w < n_words; ++w) {
      const uint32_t bits = mask[w];
      if (bits == ~0u) continue;
      const int64_t end = std::min<int64_t>(static_cast<int64_t>(w) * 32 + 32, n_vocab);
      for (int64_t id = static_cast<int64_t>(w) * 32; id < end; ++id) {
        if (((bits >> (id & 31)) & 1u) == 0) row[id] = -std::numeric_limits<float>::infinity();
      }
    }
  }
}
}  // namespace

void Backend::mask_logits(const TensorView& logits, std::span<const uint32_t> masks, std::span<const int32_t> rows) {
  const int64_t n_vocab = logits.cols(), n_rows = logits.rows();
  CERA_CHECK_MSG(logits.dtype == DType::kF32 && logits.packed(), "mask_logits: logits must be packed F32");
  CERA_CHECK_MSG(masks.size() == rows.size() * static_cast<size_t>((n_vocab + 31) / 32),
                 "mask_logits: one mask of ceil(n_vocab / 32) words per row");
  for (int32_t r : rows) CERA_CHECK_MSG(r >= 0 && r < n_rows, "mask_logits: a row outside the logits");
  if (rows.empty()) return;
  if (logits.device == Device::kCpu) {
    apply_masks(reinterpret_cast<float*>(logits.data), n_vocab, masks, rows);
    return;
  }
  std::vector<float> host(static_cast<size_t>(n_vocab * n_rows));
  download(host.data(), logits);
  apply_masks(host.data(), n_vocab, masks, rows);
  upload(logits, host.data());
}

}  // namespace cera::ops
