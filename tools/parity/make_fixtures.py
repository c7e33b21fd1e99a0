#!/usr/bin/env python3
# Builds the parity fixtures in tests/fixtures/parity/: tiny seeded random models of every
# architecture `cera convert` handles, saved as Hugging Face folders with a trained byte-level BPE
# tokenizer, plus the float32 logits transformers computes for fixed token sequences.
#
# Pinned (what the committed fixtures were made with): transformers==5.17.0 torch==2.11.0
# tokenizers==0.23.3 safetensors==0.8.0; `check` also needs gguf==0.19.0
# and accelerate==1.15.0. CPU is enough.
#
#   python tools/parity/make_fixtures.py build [--only N..] # models, tokenizers, logits.bin
#   python tools/parity/make_fixtures.py check --cera CERA  # cera convert -> transformers GGUF
#                                                           # loader -> logits_gguf.bin, REPORT.md
#
# gemma3, gemma3_local (GGUF_FIXTURES) are written straight to GGUF here (model.gguf, F32, gguf-py), since
# `cera convert` has no Gemma3ForCausalLM: a window of 6 and sequences of up to 48 tokens, so
# that the sliding-window layers' ring cache wraps (tests/model/sliding_window_test.cpp).
#
# logits.bin format (little-endian), read by tests/convert/parity_fixture.h:
#   8 bytes "CERALOGT", u32 version (1), u32 n_vocab, u32 n_seqs, then per sequence:
#   u32 n_tokens, i32 tokens[n_tokens], f32 logits[n_tokens][n_vocab] (every position).
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (AutoConfig, AutoModelForCausalLM, Gemma3TextConfig, GraniteConfig, LlamaConfig, Lfm2Config,
                          Lfm2MoeConfig, MistralConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen3Config,
                          Qwen3MoeConfig)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "parity"
N_VOCAB = 384

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TEXT = """The quick brown fox jumps over the lazy dog. A small model reads the same words again and
again until the merges of its tokenizer start to look like English: the, and, of, to, in, is.
Once upon a time there was a little girl who loved to read stories about dragons and castles.
She walked to the river every morning, counted the stones, and wrote 12 numbers in her notebook.
Engineers compare logits from two implementations; when they agree to many digits, the weights,
the rotary embeddings and the attention were all converted the right way. It's simple, isn't it?
We'll test words like converter, tokenizer, attention, embedding, normalization and quantization.
""" * 3

COMMON = dict(vocab_size=N_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
              rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1)

# LFM2 family: hidden 64, 3 layers (conv, attention, conv), L_cache 3; lfm2's intermediate_size 192
# becomes 2/3 * 192 = 128 (block_auto_adjust_ff_dim, multiple of 32). lfm2_conv is a single
# convolution layer (the model on which a context shift is exactly a fresh run, see
# tests/model/recurrent_state_test.cpp). MoE: 8 experts of width 32, k = 2, renormalised.
LFM2_COMMON = dict(vocab_size=N_VOCAB, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                   max_position_embeddings=2048, norm_eps=1e-5, bos_token_id=0, eos_token_id=1, pad_token_id=1,
                   conv_L_cache=3, tie_word_embeddings=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
LFM2_LAYERS = ["conv", "full_attention", "conv"]

# name -> (config factory, pre-tokenizer family, transformers GGUF loader supports it)
FIXTURES = {
    "llama": (lambda: LlamaConfig(**COMMON, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                                  tie_word_embeddings=False), "llama3", True),
    "llama3_rope": (lambda: LlamaConfig(**COMMON, tie_word_embeddings=False, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 512}), "llama3", True),
    "mistral": (lambda: MistralConfig(**COMMON, sliding_window=None, tie_word_embeddings=False,
                                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                "gpt2", True),
    "qwen2": (lambda: Qwen2Config(**COMMON, tie_word_embeddings=True,
                                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
              "qwen2", True),
    "qwen3": (lambda: Qwen3Config(**COMMON, head_dim=32, tie_word_embeddings=True,
                                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
              "qwen2", True),
    "granite": (lambda: GraniteConfig(**COMMON, tie_word_embeddings=False, embedding_multiplier=12.0,
                                      attention_multiplier=0.125, residual_multiplier=0.22,
                                      logits_scaling=4.0,
                                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                "gpt2", False),
    "lfm2": (lambda: Lfm2Config(**LFM2_COMMON, intermediate_size=192, num_hidden_layers=3, layer_types=LFM2_LAYERS,
                                block_auto_adjust_ff_dim=True, block_multiple_of=32, block_ffn_dim_multiplier=1.0),
             "llama3", True),
    "lfm2moe": (lambda: Lfm2MoeConfig(**LFM2_COMMON, intermediate_size=128, moe_intermediate_size=32,
                                      num_hidden_layers=3, layer_types=LFM2_LAYERS, num_dense_layers=1,
                                      num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                      use_expert_bias=True),
                "llama3", False),
    "qwen3moe": (lambda: Qwen3MoeConfig(**COMMON, head_dim=16, moe_intermediate_size=32, num_experts=8,
                                        num_experts_per_tok=2, norm_topk_prob=True, tie_word_embeddings=False,
                                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
                 "qwen2", True),
    "lfm2_conv": (lambda: Lfm2Config(**LFM2_COMMON, intermediate_size=192, num_hidden_layers=1, layer_types=["conv"],
                                     block_auto_adjust_ff_dim=True, block_multiple_of=32,
                                     block_ffn_dim_multiplier=1.0),
                  "llama3", False),
}
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM", "granite": "GraniteForCausalLM", "lfm2": "Lfm2ForCausalLM",
                 "lfm2_moe": "Lfm2MoeForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM"}

# Written as GGUF by this script (no `cera convert` support): name -> (config factory, pre-tokenizer family).
# gemma3: hidden 64, 4 heads of 16, 1 KV head (like Gemma 3 270M), 3 layers local/local/global,
# window 6; local layers use RoPE base 10000, the global one 1e6. gemma3_local: one local layer,
# the model on which a context shift is exactly a fresh run (tests/runtime/kv_cache_ring_test.cpp).
def gemma3_config(layer_types):
    return Gemma3TextConfig(
        vocab_size=N_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=len(layer_types),
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
        max_position_embeddings=2048, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=1, pad_token_id=1,
        sliding_window=6, layer_types=layer_types, tie_word_embeddings=True,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}})


GGUF_FIXTURES = {
    "gemma3": (lambda: gemma3_config(["sliding_attention", "sliding_attention", "full_attention"]), "llama3"),
    "gemma3_local": (lambda: gemma3_config(["sliding_attention"]), "llama3"),
}

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def train_tokenizer(family: str) -> PreTrainedTokenizerFast:
    specials = ["<|bos|>", "<|eos|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    if family == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        regex = LLAMA3_REGEX if family == "llama3" else QWEN2_REGEX
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=N_VOCAB, min_frequency=1, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TEXT], trainer=trainer)
    if family == "llama3":  # Llama 3 style: BOS prepended by the post-processor
        tok.post_processor = processors.TemplateProcessing(
            single="<|bos|> $A", pair="<|bos|> $A <|bos|> $B", special_tokens=[("<|bos|>", 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>")
    if family == "qwen2":
        fast.chat_template = CHAT_TEMPLATE
    return fast


def randomize(model: torch.nn.Module, seed: int) -> None:
    # Larger than transformers' 0.02 init so logits are O(1) and every weight matters; norms near
    # 1 and non-zero biases so a dropped or misplaced norm/bias changes the answer.
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.1 * noise)
        for name, b in model.named_buffers():
            # lfm2moe's expert-selection bias is a buffer (zeros at init): random here so that
            # choosing with it and weighting without it both matter.
            if name.endswith("expert_bias"):
                b.copy_(0.2 * torch.randn(b.shape, generator=g, dtype=torch.float32))


def sequences(n_real: int) -> list[list[int]]:
    rng = np.random.default_rng(1234)
    a = [0] + [int(x) for x in rng.integers(4, n_real, size=6)]          # starts with BOS, length 7
    b = [int(x) for x in np.linspace(5, n_real - 1, 16).astype(np.int64)]  # spread over the vocab
    return [a, b]


def run_logits(model, seqs) -> list[np.ndarray]:
    out = []
    with torch.no_grad():
        for s in seqs:
            # No cache: a model made only of convolution layers (lfm2_conv) has no attention cache.
            out.append(model(torch.tensor([s]), use_cache=False).logits[0].float().numpy())
    return out


def write_logits(path: Path, seqs, logits) -> None:
    with open(path, "wb") as f:
        f.write(b"CERALOGT" + struct.pack("<III", 1, logits[0].shape[1], len(seqs)))
        for s, l in zip(seqs, logits):
            f.write(struct.pack("<I", len(s)) + np.asarray(s, dtype="<i4").tobytes())
            f.write(np.ascontiguousarray(l, dtype="<f4").tobytes())


def read_logits(path: Path):
    data = path.read_bytes()
    assert data[:8] == b"CERALOGT"
    _, n_vocab, n_seqs = struct.unpack_from("<III", data, 8)
    pos, seqs, logits = 20, [], []
    for _ in range(n_seqs):
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        seqs.append(np.frombuffer(data, "<i4", n, pos).tolist())
        pos += 4 * n
        logits.append(np.frombuffer(data, "<f4", n * n_vocab, pos).reshape(n, n_vocab))
        pos += 4 * n * n_vocab
    return seqs, logits


def build(only) -> None:
    torch.manual_seed(0)
    for i, (name, (make_config, family, _)) in enumerate(FIXTURES.items()):
        if only and name not in only:
            continue
        d = OUT / name
        d.mkdir(parents=True, exist_ok=True)
        config = make_config()
        config.architectures = [ARCHITECTURES[config.model_type]]
        torch.manual_seed(100 + i)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
        randomize(model, 100 + i)
        model.save_pretrained(d, safe_serialization=True)
        tok = train_tokenizer(family)
        tok.save_pretrained(d)
        seqs = sequences(len(tok))
        write_logits(d / "logits.bin", seqs, run_logits(model, seqs))
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"{name}: {config.architectures[0]}, vocab {len(tok)} trained / {N_VOCAB}, {size / 1e6:.2f} MB")


def long_sequence(n_real: int, n: int) -> list[int]:
    rng = np.random.default_rng(4321)
    return [0] + [int(x) for x in rng.integers(4, n_real, size=n - 1)]


def write_gemma3_gguf(path: Path, config, model, tok: PreTrainedTokenizerFast) -> None:
    # llama.cpp's conventions (FORMATS.md, gemma3): norm weights + 1, NEOX rope (no Q/K
    # permutation), tied output, the local/global pattern as a per-layer bool array.
    import gguf
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_name("cera-parity")
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_block_count(config.num_hidden_layers)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_key_length(config.head_dim)
    w.add_value_length(config.head_dim)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_rope_freq_base(config.rope_parameters["full_attention"]["rope_theta"])
    w.add_float32("gemma3.rope.freq_base_swa", config.rope_parameters["sliding_attention"]["rope_theta"])
    w.add_sliding_window(config.sliding_window)
    w.add_array("gemma3.attention.sliding_window_pattern", [t == "sliding_attention" for t in config.layer_types])
    # Tokenizer: byte-level BPE, like `cera convert` writes it (unused ids as [PADn]).
    tj = json.loads(tok.backend_tokenizer.to_str())
    tokens = [f"[PAD{i}]" for i in range(N_VOCAB)]
    types = [gguf.TokenType.UNUSED] * N_VOCAB
    for text, i in tj["model"]["vocab"].items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for a in tj["added_tokens"]:
        tokens[a["id"]], types[a["id"]] = a["content"], gguf.TokenType.CONTROL
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(True)
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for name, t in model.state_dict().items():
        a = t.float().numpy().copy()
        if name.endswith("norm.weight"):
            a += 1.0
        if name == "model.embed_tokens.weight":
            gguf_name = "token_embd.weight"
        elif name == "model.norm.weight":
            gguf_name = "output_norm.weight"
        elif name == "lm_head.weight":
            continue  # tied
        else:
            parts = name.split(".")  # model.layers.N.<module...>.weight
            gguf_name = f"blk.{parts[2]}.{names['.'.join(parts[3:-1])]}.weight"
        w.add_tensor(gguf_name, a)  # numpy [out, in] is GGUF ne [in, out]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build_gguf_fixtures(only) -> None:
    for i, (name, (make_config, family)) in enumerate(GGUF_FIXTURES.items()):
        if only and name not in only:
            continue
        d = OUT / name
        d.mkdir(parents=True, exist_ok=True)
        config = make_config()
        config.architectures = ["Gemma3ForCausalLM"]
        torch.manual_seed(200 + i)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager").eval()
        randomize(model, 200 + i)
        config.save_pretrained(d)
        tok = train_tokenizer(family)
        write_gemma3_gguf(d / "model.gguf", config, model, tok)
        seqs = sequences(len(tok)) + [long_sequence(len(tok), 48)]
        write_logits(d / "logits.bin", seqs, run_logits(model, seqs))
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"{name}: Gemma3ForCausalLM -> model.gguf, vocab {len(tok)} trained / {N_VOCAB}, {size / 1e6:.2f} MB")


def gguf_key_length(path: Path):
    import gguf
    reader = gguf.GGUFReader(path)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    field = reader.fields.get(f"{arch}.attention.key_length")
    return None if field is None else int(field.parts[-1][0])


def check_rope_freqs(gguf_path: Path, hf_config) -> str:
    import gguf
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    reader = gguf.GGUFReader(gguf_path)
    ours = next(np.array(t.data, dtype=np.float32) for t in reader.tensors if t.name == "rope_freqs.weight")
    scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](hf_config, "cpu")
    p = hf_config.rope_parameters
    dim = hf_config.head_dim
    plain = 1.0 / (p["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    expected = (plain / scaled).numpy()  # the factor each dimension's frequency is divided by
    rel = float(np.abs(ours - expected).max() / np.abs(expected).max())
    return f"rope_freqs vs transformers' llama3 inv_freq ratio: max rel {rel:.2e} ({ours.size} factors)"


def gguf_u32(path: Path, suffix: str):
    import gguf
    reader = gguf.GGUFReader(path)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    field = reader.fields.get(f"{arch}.{suffix}")
    return None if field is None else int(field.parts[-1][0])


def check(cera: str) -> None:
    rows = []
    rope_note = ""
    for name, (_, _, gguf_ok) in FIXTURES.items():
        d = OUT / name
        seqs, ref = read_logits(d / "logits.bin")
        with tempfile.TemporaryDirectory() as tmp:
            gguf_path = Path(tmp) / f"{name}.gguf"
            # general.name must not contain "mistral": transformers' GGUF loader then switches to a
            # "mistral" architecture that gguf-py does not map (the tensors are llama's either way).
            subprocess.run([cera, "convert", str(d), "-o", str(gguf_path), "--type", "f32", "--name", "cera-parity"],
                           check=True)
            if not gguf_ok:
                why = {"granite": "transformers' GGUF loader has no granite",
                       "lfm2moe": "transformers' GGUF loader has no lfm2moe",
                       "lfm2_conv": "not attempted: no attention layer, the loader derives the KV head count from them"}[name]
                rows.append((name, f"n/a ({why})", "", ""))
                continue
            config = AutoConfig.from_pretrained(tmp, gguf_file=gguf_path.name)
            # transformers 5.17's GGUF config mapping ignores <arch>.attention.key_length, so a
            # qwen3 head_dim that differs from hidden/heads is taken from the GGUF file here.
            key_length = gguf_key_length(gguf_path)
            if key_length is not None:
                config.head_dim = key_length
            # Nor does it map expert_feed_forward_length (qwen3moe's moe_intermediate_size).
            n_ff_exp = gguf_u32(gguf_path, "expert_feed_forward_length")
            if n_ff_exp is not None:
                config.moe_intermediate_size = n_ff_exp
            if name == "llama3_rope":
                # The loader does not read rope_freqs (Llama 3 scaling has no metadata keys), so
                # the tensor is judged on its own against transformers' llama3 inverse
                # frequencies, and the model runs with the checkpoint's rope parameters.
                rope_note = check_rope_freqs(gguf_path, AutoConfig.from_pretrained(d))
                config.rope_parameters = AutoConfig.from_pretrained(d).rope_parameters
            model = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=gguf_path.name, config=config,
                                                         dtype=torch.float32).eval()
            got = run_logits(model, seqs)
        write_logits(d / "logits_gguf.bin", seqs, got)
        rel = max(float(np.abs(g - r).max() / np.abs(r).max()) for g, r in zip(got, ref))
        same_argmax = all((g.argmax(-1) == r.argmax(-1)).all() for g, r in zip(got, ref))
        rows.append((name, f"{rel:.3e}", "yes" if same_argmax else "NO", "pass" if rel < 1e-4 and same_argmax else "FAIL"))
    lines = ["# Parity fixtures: conventions check", "",
             "Each fixture's safetensors logits (transformers, float32) against transformers running the",
             "GGUF that `cera convert --type f32` wrote (`from_pretrained(dir, gguf_file=...)`).",
             "rel = max |delta logit| / max |logit| over all positions of both sequences.", "",
             f"transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
             f"gguf {__import__('importlib.metadata').metadata.version('gguf')}", "",
             "| fixture | rel | same argmax | verdict |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} | {e} |" for a, b, c, e in rows]
    lines += ["", "llama3_rope: transformers' GGUF loader ignores the rope_freqs tensor, so the model is run",
              "with the checkpoint's rope_parameters and the tensor is compared on its own: " + rope_note + ".",
              "qwen3: the loader ignores attention.key_length; head_dim is taken from the GGUF's key_length.",
              "mistral: written as arch `llama` (llama.cpp's convention); general.name avoids \"mistral\",",
              "which would make transformers' loader switch to an architecture gguf-py does not map.",
              "qwen3moe: the loader ignores expert_feed_forward_length; moe_intermediate_size is taken from the GGUF."]
    (OUT / "REPORT.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("command", choices=["build", "check"])
    ap.add_argument("--cera", default=str(ROOT / "build-conv" / "apps" / "cli" / "cera"))
    ap.add_argument("--only", nargs="*", default=[], help="build only these fixtures (default: all)")
    args = ap.parse_args()
    if args.command == "build":
        build(args.only)
        build_gguf_fixtures(args.only)
    else:
        check(args.cera)


if __name__ == "__main__":
    sys.exit(main())
