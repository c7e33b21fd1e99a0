#!/usr/bin/env bash
# Quality of cera's CUDA backend on the real models, on the GPU machine, in one call once the
# model files are there: greedy chat answers, CPU-vs-CUDA greedy tokens, and top-1 / KL divergence
# against transformers (float32 on the dequantized GGUF) through tools/quality/real_models.py.
#   tools/quality/device_quality.sh CERA_BIN MODEL_DIR OUT
# MODEL_DIR holds SmolLM2-135M-Instruct.Q4_1.gguf and gemma-3-270m-q4_k_m.gguf. The GGUF
# Python package must be importable (carry its wheel; transformers and torch are on the machine).
set -uo pipefail
cera=$1 models=$2 out=$3
mkdir -p "$out"
smol=$models/SmolLM2-135M-Instruct.Q4_1.gguf
gemma=$models/gemma-3-270m-q4_k_m.gguf
{
  echo "## chat answers (greedy, 30 tokens)"
  for dev in cuda cpu; do
    printf '%s: ' "$dev"
    "$cera" run -m "$smol" --device $dev --chat -p "What is the capital of France?" -n 30 --temp 0 2>/dev/null
  done
  echo "## SmolLM2 greedy 64 tokens, CPU vs CUDA"
  "$cera" run -m "$smol" --device cpu -p "The three primary colors are" -n 64 --temp 0 >"$out/smol-cpu.txt" 2>/dev/null
  "$cera" run -m "$smol" --device cuda -p "The three primary colors are" -n 64 --temp 0 >"$out/smol-cuda.txt" 2>/dev/null
  if cmp -s "$out/smol-cpu.txt" "$out/smol-cuda.txt"; then echo "identical"; else echo "DIFFERENT"; diff "$out/smol-cpu.txt" "$out/smol-cuda.txt"; fi
  echo "## gemma3 on CUDA"
  "$cera" run -m "$gemma" --device cuda -p "The capital of France is" -n 24 --temp 0 2>&1 | tail -5
  echo "## top-1 / KLD vs transformers float32"
  echo "| model | device | positions | top-1 | mean KLD | p99 KLD | max KLD |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  for m in "$smol" "$gemma"; do
    for dev in cuda cpu; do  # the reference logits are computed once per model (--ref-cache)
      python3 tools/quality/real_models.py kld --cera "$cera" --model "$m" --device $dev \
        --ref-cache "$out/ref-$(basename "$m").npz" 2>"$out/kld-$(basename "$m")-$dev.err" | grep '^|'
    done
  done
} 2>&1 | tee "$out/quality.md"
