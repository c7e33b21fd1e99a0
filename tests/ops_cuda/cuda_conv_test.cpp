// short_conv of the CUDA backend against the CPU backend: outputs NaN-poisoned, the carried state
// compared after every call, several calls in a row on the same state (a prompt, then decode
// steps), odd and even channel counts, kernel lengths 1 to 4 and 16 (the bound), batches below,
// at and above the kernel length and the CUDA chunk of 16 tokens. Tolerance 1e-6 on
// ‖gpu − cpu‖₂ / ‖cpu‖₂: the same float operations in the same order.
#include "cuda_test_util.h"

namespace cera::ops::test {
namespace {

TEST(CudaShortConv, MatchesCpuAcrossCalls) {
  CERA_SKIP_WITHOUT_CUDA();
  Backends& be = backends();
  std::mt19937 rng(21);
  for (int64_t n_ch : quick_sweep() ? std::vector<int64_t>{7, 64} : std::vector<int64_t>{7, 64, 2048}) {
    for (int64_t L : {1, 2, 3, 4, 16}) {
      const std::vector<float> kernel = random_floats(rng, size_t(L * n_ch));
      const std::vector<float> state0 = random_floats(rng, size_t((L - 1) * n_ch));
      // A prompt, then decode steps and a second prompt on the same state.
      const std::vector<int64_t> calls = {67, 1, 1, 2, 3, 16, 17};
      std::vector<std::vector<float>> bcx;
      for (int64_t n : calls) bcx.push_back(random_floats(rng, size_t(3 * n_ch * n)));
      std::vector<std::vector<float>> outs[2], states[2];
      Backend* list[2] = {be.cuda.get(), be.cpu.get()};
      for (int i = 0; i < 2; ++i) {
        Backend& b = *list[i];
        Tensor kt = make_tensor(b, {L, n_ch, 1, 1}, kernel);
        // The state as a slice of a larger buffer, as the runtime keeps one per layer and sequence.
        std::vector<float> wide(size_t((L - 1) * n_ch * 3), 5.0f);
        std::copy(state0.begin(), state0.end(), wide.begin() + (L - 1) * n_ch);
        Tensor st = make_tensor(b, {L - 1, n_ch * 3, 1, 1}, wide);
        const TensorView state = st.view.slice_rows(n_ch, n_ch);
        for (size_t c = 0; c < calls.size(); ++c) {
          Tensor in = make_tensor(b, {3 * n_ch, calls[c], 1, 1}, bcx[c]);
          Tensor out = make_tensor(b, {n_ch, calls[c], 1, 1}, std::vector<float>(size_t(n_ch * calls[c])));
          poison(b, out.view);
          b.short_conv(out.view, in.view, kt.view, state);
          outs[i].push_back(read_tensor(b, out.view));
          states[i].push_back(read_tensor(b, st.view));  // the whole buffer: neighbours stay untouched
        }
      }
      for (size_t c = 0; c < calls.size(); ++c) {
        const std::string what = "short_conv n_ch=" + std::to_string(n_ch) + " L=" + std::to_string(L) + " call " +
                                 std::to_string(c) + " (" + std::to_string(calls[c]) + " tokens)";
        CERA_EXPECT_CLOSE(outs[0][c], outs[1][c], 1e-6, what + " out");
        CERA_EXPECT_CLOSE(states[0][c], states[1][c], 1e-6, what + " state");
      }
    }
  }
}

}  // namespace
}  // namespace cera::ops::test
