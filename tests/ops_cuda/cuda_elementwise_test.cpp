// rms_norm, rope, gated_activation, add_scaled and scale of the CUDA backend against the CPU
// backend over odd and even shapes. Float32 arithmetic on both sides with a different reduction
// order (rms_norm) or library (expf/tanhf, double-precision RoPE angles): tolerance 1e-5 on
// ‖gpu − cpu‖₂ / ‖cpu‖₂.
#include "cuda_test_util.h"

namespace cera::ops::test {
namespace {

constexpr double kTol = 1e-5;

// Runs fn(backend, tensors...) on both backends with the same inputs, returns both results of
// the tensor at index `result`.
template <class Fn>
void both(const std::vector<std::pair<std::array<int64_t, 4>, std::vector<float>>>& inputs, size_t result, Fn&& fn,
          const std::string& what, double tol = kTol, bool poison_result = false) {
  Backends& be = backends();
  std::vector<float> got[2];
  Backend* list[2] = {be.cuda.get(), be.cpu.get()};
  for (int i = 0; i < 2; ++i) {
    std::vector<Tensor> ts;
    for (const auto& [ne, v] : inputs) ts.push_back(make_tensor(*list[i], ne, v));
    if (poison_result) poison(*list[i], ts[result].view);
    fn(*list[i], ts);
    got[i] = read_tensor(*list[i], ts[result].view);
  }
  CERA_EXPECT_CLOSE(got[0], got[1], tol, what);
}

TEST(CudaElementwise, RmsNorm) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(1);
  for (int64_t n : {1, 7, 64, 257, 576, 4096}) {
    for (int64_t rows : {1, 3, 17}) {
      const auto x = random_floats(rng, size_t(n * rows), -3, 3);
      const auto w = random_floats(rng, size_t(n));
      const std::array<int64_t, 4> shape{n, rows, 1, 1};
      both({{shape, x}, {{n, 1, 1, 1}, w}, {shape, std::vector<float>(x.size())}}, 2,
           [](Backend& b, std::vector<Tensor>& t) { b.rms_norm(t[2].view, t[0].view, t[1].view, 1e-5f); },
           "rms_norm n=" + std::to_string(n), kTol, true);
      both({{shape, x}, {{n, 1, 1, 1}, w}}, 0,
           [](Backend& b, std::vector<Tensor>& t) { b.rms_norm(t[0].view, t[0].view, t[1].view, 1e-6f); },
           "rms_norm in place n=" + std::to_string(n));
    }
  }
}

TEST(CudaElementwise, Rope) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2);
  std::vector<float> factors(64);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.25f * float(i % 5);
  for (RopeKind kind : {RopeKind::kNorm, RopeKind::kNeox}) {
    for (int64_t head_dim : {8, 64, 128}) {
      for (int64_t n_rot : {head_dim, head_dim / 2}) {
        for (int64_t n_heads : {1, 3, 8}) {
          for (bool with_factors : {false, true}) {
            const std::vector<int32_t> positions = {0, 1, 17, 4095, 10000};
            const auto n_tokens = int64_t(positions.size());
            RopeParams p{.kind = kind, .n_rot = int32_t(n_rot), .freq_base = 500000.0f, .freq_scale = 0.5f,
                         .freq_factors = with_factors ? factors.data() : nullptr};
            both({{{head_dim, n_heads, n_tokens, 1}, random_floats(rng, size_t(head_dim * n_heads * n_tokens))}}, 0,
                 [&](Backend& b, std::vector<Tensor>& t) { b.rope(t[0].view, positions, p); },
                 "rope head_dim=" + std::to_string(head_dim) + " n_rot=" + std::to_string(n_rot));
          }
        }
      }
    }
  }
}

TEST(CudaElementwise, GatedActivationAddScaledScale) {
  CERA_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  for (int64_t n : {1, 5, 64, 1537}) {
    for (int64_t rows : {1, 4, 13}) {
      const std::array<int64_t, 4> s{n, rows, 1, 1};
      const auto a = random_floats(rng, size_t(n * rows), -6, 6), b = random_floats(rng, size_t(n * rows), -2, 2);
      const std::vector<float> zero(a.size());
      for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
        both({{s, a}, {s, b}, {s, zero}}, 2,
             [&](Backend& be, std::vector<Tensor>& t) { be.gated_activation(t[2].view, t[0].view, t[1].view, act); },
             "gated_activation n=" + std::to_string(n), kTol, true);
        both({{s, a}, {s, b}}, 0,
             [&](Backend& be, std::vector<Tensor>& t) { be.gated_activation(t[0].view, t[0].view, t[1].view, act); },
             "gated_activation aliased n=" + std::to_string(n));
      }
      both({{s, a}, {s, b}, {s, zero}}, 2,
           [](Backend& be, std::vector<Tensor>& t) { be.add_scaled(t[2].view, t[0].view, t[1].view, 0.7f); },
           "add_scaled", kTol, true);
      both({{s, a}, {s, b}}, 1,
           [](Backend& be, std::vector<Tensor>& t) { be.add_scaled(t[1].view, t[0].view, t[1].view, -1.5f); },
           "add_scaled aliased");
      both({{s, a}}, 0, [](Backend& be, std::vector<Tensor>& t) { be.scale(t[0].view, 0.125f); }, "scale");
    }
  }
}

}  // namespace
}  // namespace cera::ops::test

namespace cera::ops::test {
namespace {

// Backend::copy on the device (the recurrent-state snapshots): exact, strided rows included.
TEST(CudaCopy, CopiesTheViewExactly) {
  CERA_SKIP_WITHOUT_CUDA();
  Backend& cuda = *backends().cuda;
  std::mt19937 rng(9);
  for (int64_t n : {1, 7, 4096, 300001}) {
    const auto x = random_floats(rng, size_t(n));
    Tensor src = make_tensor(cuda, {n, 1, 1, 1}, x);
    Tensor dst = make_tensor(cuda, {n, 1, 1, 1}, std::vector<float>(size_t(n), 0.0f));
    poison(cuda, dst.view);
    cuda.copy(dst.view, src.view);
    EXPECT_EQ(read_tensor(cuda, dst.view), x) << "n=" << n;
  }
  // Every other row of a [5, 6] tensor into a packed [5, 3] one.
  const auto x = random_floats(rng, 30);
  Tensor src = make_tensor(cuda, {5, 6, 1, 1}, x);
  Tensor dst = make_tensor(cuda, {5, 3, 1, 1}, std::vector<float>(15, 0.0f));
  TensorView strided = src.view;
  strided.ne = {5, 3, 1, 1};
  strided.row_stride = 2 * src.view.stride();
  cuda.copy(dst.view, strided);
  const std::vector<float> got = read_tensor(cuda, dst.view);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(got[size_t(r * 5 + c)], x[size_t(2 * r * 5 + c)]) << r << "," << c;
  }
}

}  // namespace
}  // namespace cera::ops::test
