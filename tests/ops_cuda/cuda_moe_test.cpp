// moe_route, matmul_experts, moe_combine and short_conv of the CUDA backend against the CPU
// backend (single-term int8 activations, like the CUDA GEMV), outputs NaN-poisoned, over odd and
// even shapes, every weight type the dense GEMV has, 1, 3, 16 (decode launch) and 67 tokens
// (grouped launch). Tolerances:
//  - matmul_experts: max |gpu - cpu| / sum_i |w_i x_i| < 2e-5 on both launches and every type:
//    both backends quantize activations identically (Q8_0 / Q8_K), so block dots agree exactly
//    and only the float summation order differs (as the GEMV path of cuda_matmul_test.cpp);
//  - moe_route: ids identical, weights within 1e-5 relative (expf vs the host's exp);
//  - moe_combine, short_conv: 1e-6 on ‖gpu − cpu‖₂ / ‖cpu‖₂ (the same float operations in the
//    same order; only contraction on the host side can differ).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "cuda_test_util.h"
#include "quant/quant.h"

namespace cera::ops::test {
namespace {

constexpr DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

struct I32Tensor {
  std::unique_ptr<Buffer> buffer;
  TensorView view;
};
I32Tensor make_i32(Backend& b, std::array<int64_t, 4> ne, const std::vector<int32_t>& values) {
  I32Tensor t;
  auto buf = b.allocate(values.size() * sizeof(int32_t) + 4);
  CERA_CHECK(buf.ok());
  t.buffer = std::move(buf).value();
  t.view = t.buffer->view(DType::kI32, ne, b.device());
  CERA_CHECK(t.view.n_elements() == int64_t(values.size()));
  b.upload(t.view, values.data());
  return t;
}
std::vector<int32_t> read_i32(Backend& b, const TensorView& v) {
  std::vector<int32_t> out(size_t(v.n_elements()));
  b.download(out.data(), v);
  return out;
}

std::vector<std::byte> random_weight(std::mt19937& rng, DType t, int64_t n_in, int64_t n_rows) {
  const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(t, uint64_t(n_in)));
  std::vector<std::byte> w(size_t(row_bytes * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> f = random_floats(rng, size_t(n_in));
    if (t == DType::kF32) {
      std::memcpy(w.data() + r * row_bytes, f.data(), size_t(row_bytes));
    } else {
      quant::quantize_row(t, f.data(), w.data() + r * row_bytes, n_in);
    }
  }
  return w;
}

// k distinct experts per token; `skew` sends most tokens to the same few experts (large groups:
// several tiles and chunks per expert).
std::vector<int32_t> random_ids(std::mt19937& rng, int64_t n_expert, int64_t k, int64_t n_tokens, bool skew) {
  std::vector<int32_t> ids(size_t(k * n_tokens));
  std::vector<int32_t> e(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::iota(e.begin(), e.end(), 0);
    if (!skew || t % 5 == 4) std::shuffle(e.begin(), e.end(), rng);
    for (int64_t j = 0; j < k; ++j) ids[size_t(t * k + j)] = e[size_t(j)];
  }
  return ids;
}

struct ExpertCase {
  DType type;
  int64_t n_in, n_out, n_expert, k, n_tokens;
  bool shared_x, skew;
};

std::string describe(const ExpertCase& c) {
  return std::string(dtype_name(c.type)) + " n_in=" + std::to_string(c.n_in) + " n_out=" + std::to_string(c.n_out) +
         " n_expert=" + std::to_string(c.n_expert) + " k=" + std::to_string(c.k) +
         " n_tokens=" + std::to_string(c.n_tokens) + (c.shared_x ? " shared x" : " x per slot") +
         (c.skew ? " skewed" : "");
}

void check_experts(const ExpertCase& c, std::mt19937& rng) {
  Backends& be = backends();
  std::vector<std::byte> w = random_weight(rng, c.type, c.n_in, c.n_out * c.n_expert);
  const std::vector<int32_t> ids = random_ids(rng, c.n_expert, c.k, c.n_tokens, c.skew);
  const int64_t n_x = c.shared_x ? c.n_tokens : c.k * c.n_tokens;
  const std::vector<float> x = random_floats(rng, size_t(c.n_in * n_x));
  const TensorView host_w = make_view(w.data(), c.type, {c.n_in, c.n_out, c.n_expert, 1});
  std::vector<float> results[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    Backend& b = *list[i];
    std::unique_ptr<Buffer> keep;
    TensorView wv = host_w;  // the CPU reads the host bytes as they are
    if (i == 0) {
      auto imported = b.import_weight(host_w, keep);
      CERA_CHECK_MSG(imported.ok(), imported.status().to_string());
      wv = *imported;
    }
    const std::array<int64_t, 4> x_ne = c.shared_x ? std::array<int64_t, 4>{c.n_in, c.n_tokens, 1, 1}
                                                    : std::array<int64_t, 4>{c.n_in, c.k, c.n_tokens, 1};
    Tensor xt = make_tensor(b, x_ne, x);
    I32Tensor it = make_i32(b, {c.k, c.n_tokens, 1, 1}, ids);
    Tensor out = make_tensor(b, {c.n_out, c.k, c.n_tokens, 1}, std::vector<float>(size_t(c.n_out * c.k * c.n_tokens)));
    poison(b, out.view);
    b.matmul_experts(out.view, wv, xt.view, it.view);
    results[i] = read_tensor(b, out.view);
  }
  // max |gpu - cpu| / sum_i |w_i x_i| per output.
  const auto row_bytes = static_cast<int64_t>(*dtype_row_bytes(c.type, uint64_t(c.n_in)));
  std::vector<float> wf(size_t(c.n_in * c.n_out * c.n_expert));
  for (int64_t r = 0; r < c.n_out * c.n_expert; ++r) {
    quant::dequantize_row(c.type, w.data() + r * row_bytes, wf.data() + r * c.n_in, c.n_in);
  }
  double worst = 0;
  for (int64_t r = 0; r < c.k * c.n_tokens && worst != INFINITY; ++r) {
    const int64_t e = ids[size_t(r)];
    const float* xr = x.data() + (c.shared_x ? r / c.k : r) * c.n_in;
    for (int64_t o = 0; o < c.n_out; ++o) {
      const float* wrow = wf.data() + (e * c.n_out + o) * c.n_in;
      double s = 0;
      for (int64_t i = 0; i < c.n_in; ++i) s += std::fabs(double(wrow[i]) * xr[i]);
      const float g = results[0][size_t(r * c.n_out + o)], ref = results[1][size_t(r * c.n_out + o)];
      if (std::isnan(g)) {
        worst = INFINITY;
        break;
      }
      worst = std::max(worst, std::fabs(double(g) - ref) / std::max(s, 1e-30));
    }
  }
  EXPECT_LE(worst, 2e-5) << describe(c);
}

TEST(CudaMatmulExperts, EveryTypeShapeAndBatch) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(4321);
  const std::vector<int64_t> batches = {1, 3, 16, 67};
  for (DType t : kTypes) {
    const bool k_quant = dtype_block_size(t) == 256, plain = dtype_block_size(t) == 1;
    std::vector<int64_t> n_ins = k_quant ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{64, 96, 1056};
    if (plain) n_ins.insert(n_ins.end(), {7, 33});
    if (quick_sweep()) n_ins.resize(1);
    for (int64_t n_in : n_ins) {
      for (int64_t n_tokens : batches) {
        // (n_out, n_expert, k): odd and even, experts that nobody chooses, k = 1 and k = n_expert.
        for (const auto& [n_out, n_expert, k] : {std::array<int64_t, 3>{7, 5, 2}, std::array<int64_t, 3>{64, 8, 8},
                                                  std::array<int64_t, 3>{131, 32, 4}, std::array<int64_t, 3>{16, 3, 1}}) {
          const bool shared_x = (n_out + n_tokens) % 2 == 1;
          check_experts({t, n_in, n_out, n_expert, k, n_tokens, shared_x, false}, rng);
        }
      }
      // Large groups: one expert holds most rows (chunks of 8, several 32-row tiles).
      check_experts({t, n_in, 40, 6, 2, 16, true, true}, rng);
      check_experts({t, n_in, 40, 6, 2, 67, false, true}, rng);
    }
  }
}

TEST(CudaMatmulExperts, RealShapes) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(77);
  // qwen3-30b-a3b's gate/up and down (n_embd 2048, expert n_ff 768, 128 experts, 8 used), fewer experts.
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kF16}) {
    if (quick_sweep() && t != DType::kQ4_0) continue;
    for (int64_t n_tokens : {1, 16, 67}) {
      check_experts({t, 2048, 768, 16, 8, n_tokens, true, false}, rng);
      check_experts({t, 768, 2048, 16, 8, n_tokens, false, false}, rng);
    }
  }
}

TEST(CudaMoeRoute, MatchesCpu) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(12);
  for (RouterGating gating : {RouterGating::kSoftmax, RouterGating::kSigmoid}) {
    for (int64_t n_expert : quick_sweep() ? std::vector<int64_t>{9, 128} : std::vector<int64_t>{4, 9, 64, 128}) {
      for (int64_t k : {1, 2, 8}) {
        if (k > n_expert) continue;
        for (int64_t n_tokens : {1, 3, 16, 67}) {
          for (bool normalize : {false, true}) {
            const bool with_bias = gating == RouterGating::kSigmoid && (n_tokens + k) % 2 == 1;
            const std::vector<float> logits = random_floats(rng, size_t(n_expert * n_tokens), -4, 4);
            const std::vector<float> bias = random_floats(rng, size_t(n_expert), -0.5f, 0.5f);
            std::vector<int32_t> ids[2];
            std::vector<float> weights[2];
            Backend* list[2] = {be.cuda.get(), be.cpu.get()};
            for (int i = 0; i < 2; ++i) {
              Backend& b = *list[i];
              Tensor lt = make_tensor(b, {n_expert, n_tokens, 1, 1}, logits);
              Tensor bt = make_tensor(b, {n_expert, 1, 1, 1}, bias);
              I32Tensor it = make_i32(b, {k, n_tokens, 1, 1}, std::vector<int32_t>(size_t(k * n_tokens), -7));
              Tensor wt = make_tensor(b, {k, n_tokens, 1, 1}, std::vector<float>(size_t(k * n_tokens)));
              poison(b, wt.view);
              const RouterParams p{.n_expert_used = int32_t(k),
                                   .gating = gating,
                                   .normalize = normalize,
                                   .scale = 1.5f,
                                   .selection_bias = with_bias ? &bt.view : nullptr};
              b.moe_route(it.view, wt.view, lt.view, p);
              ids[i] = read_i32(b, it.view);
              weights[i] = read_tensor(b, wt.view);
            }
            const std::string what = std::string(gating == RouterGating::kSoftmax ? "softmax" : "sigmoid") +
                                     " E=" + std::to_string(n_expert) + " k=" + std::to_string(k) +
                                     " n_tokens=" + std::to_string(n_tokens) + (normalize ? " normalized" : "") +
                                     (with_bias ? " bias" : "");
            EXPECT_EQ(ids[0], ids[1]) << what;
            CERA_EXPECT_CLOSE(weights[0], weights[1], 1e-5, what);
          }
        }
      }
    }
  }
}

TEST(CudaMoeCombine, MatchesCpu) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(13);
  for (int64_t n : quick_sweep() ? std::vector<int64_t>{7, 64} : std::vector<int64_t>{7, 64, 2048}) {
    for (int64_t k : {1, 2, 8}) {
      for (int64_t n_tokens : {1, 3, 16, 67}) {
        const std::vector<float> eo = random_floats(rng, size_t(n * k * n_tokens));
        const std::vector<float> w = random_floats(rng, size_t(k * n_tokens), 0.0f, 1.0f);
        std::vector<float> results[2];
        Backend* list[2] = {be.cuda.get(), be.cpu.get()};
        for (int i = 0; i < 2; ++i) {
          Backend& b = *list[i];
          Tensor et = make_tensor(b, {n, k, n_tokens, 1}, eo);
          Tensor wt = make_tensor(b, {k, n_tokens, 1, 1}, w);
          Tensor out = make_tensor(b, {n, n_tokens, 1, 1}, std::vector<float>(size_t(n * n_tokens)));
          poison(b, out.view);
          b.moe_combine(out.view, et.view, wt.view);
          results[i] = read_tensor(b, out.view);
        }
        CERA_EXPECT_CLOSE(results[0], results[1], 1e-6,
                          "moe_combine n=" + std::to_string(n) + " k=" + std::to_string(k) +
                              " n_tokens=" + std::to_string(n_tokens));
      }
    }
  }
}

// The MoE block as the model runs it (router matmul, route, three expert products, gated
// activation, combine), with no synchronisation in between: decode batches are recorded into
// one CUDA graph, prompt batches run eagerly.
TEST(CudaMoeBlock, WholeBlockMatchesCpu) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(14);
  const int64_t n_embd = 256, n_ff = 96, n_expert = 8, k = 2;
  for (DType t : {DType::kQ4_0, DType::kQ4_K}) {
    std::vector<std::byte> router = random_weight(rng, DType::kF32, n_embd, n_expert);
    std::vector<std::byte> gate = random_weight(rng, t, n_embd, n_ff * n_expert);
    std::vector<std::byte> up = random_weight(rng, t, n_embd, n_ff * n_expert);
    std::vector<std::byte> down = random_weight(rng, DType::kQ8_0, n_ff, n_embd * n_expert);
    for (int64_t n_tokens : {1, 3, 16, 67}) {
      const std::vector<float> x = random_floats(rng, size_t(n_embd * n_tokens));
      std::vector<float> results[2];
      Backend* list[2] = {be.cuda.get(), be.cpu.get()};
      for (int i = 0; i < 2; ++i) {
        Backend& b = *list[i];
        std::unique_ptr<Buffer> keep[4];
        auto weight = [&](std::vector<std::byte>& bytes, DType dt, std::array<int64_t, 4> ne, int slot) {
          const TensorView host = make_view(bytes.data(), dt, ne);
          if (i == 1) return host;
          auto v = b.import_weight(host, keep[slot]);
          CERA_CHECK_MSG(v.ok(), v.status().to_string());
          return *v;
        };
        const TensorView wr = weight(router, DType::kF32, {n_embd, n_expert, 1, 1}, 0);
        const TensorView wg = weight(gate, t, {n_embd, n_ff, n_expert, 1}, 1);
        const TensorView wu = weight(up, t, {n_embd, n_ff, n_expert, 1}, 2);
        const TensorView wd = weight(down, DType::kQ8_0, {n_ff, n_embd, n_expert, 1}, 3);
        Tensor xt = make_tensor(b, {n_embd, n_tokens, 1, 1}, x);
        Tensor logits = make_tensor(b, {n_expert, n_tokens, 1, 1}, std::vector<float>(size_t(n_expert * n_tokens)));
        I32Tensor ids = make_i32(b, {k, n_tokens, 1, 1}, std::vector<int32_t>(size_t(k * n_tokens)));
        Tensor wts = make_tensor(b, {k, n_tokens, 1, 1}, std::vector<float>(size_t(k * n_tokens)));
        Tensor g = make_tensor(b, {n_ff, k, n_tokens, 1}, std::vector<float>(size_t(n_ff * k * n_tokens)));
        Tensor u = make_tensor(b, {n_ff, k, n_tokens, 1}, std::vector<float>(size_t(n_ff * k * n_tokens)));
        Tensor d = make_tensor(b, {n_embd, k, n_tokens, 1}, std::vector<float>(size_t(n_embd * k * n_tokens)));
        Tensor out = make_tensor(b, {n_embd, n_tokens, 1, 1}, std::vector<float>(size_t(n_embd * n_tokens)));
        poison(b, out.view);
        b.matmul(logits.view, wr, xt.view);
        b.moe_route(ids.view, wts.view, logits.view, {.n_expert_used = int32_t(k), .gating = RouterGating::kSoftmax});
        b.matmul_experts(g.view, wg, xt.view, ids.view);
        b.matmul_experts(u.view, wu, xt.view, ids.view);
        b.gated_activation(g.view, g.view, u.view, Activation::kSilu);
        b.matmul_experts(d.view, wd, g.view, ids.view);
        b.moe_combine(out.view, d.view, wts.view);
        results[i] = read_tensor(b, out.view);
      }
      // The down projection re-quantizes the activation, whose float value differs in the last
      // bits (expf): a code may round the other way (one step of max|x| / 127), so 1e-3 here.
      CERA_EXPECT_CLOSE(results[0], results[1], 1e-3,
                        std::string(dtype_name(t)) + " MoE block n_tokens=" + std::to_string(n_tokens));
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
