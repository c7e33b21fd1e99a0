// BPE pre-tokenizers: split text into the words that BPE merges run inside, exactly as the
// Hugging Face `tokenizers` regexes (and llama.cpp's regex sequences) do. Each rule set is a
// hand-written matcher over code points (no regex engine); a sequence of regexes is applied
// the way llama.cpp / HF Split(Isolated) compose them: each stage re-splits every piece of the
// previous one, and text a stage does not match stays as its own piece.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace cera::tokenizer {

// One value per distinct splitting rule set (several GGUF names may share one; see
// pre_tokenizer_from_name). Regexes are quoted in pre_tokenizer.cpp next to each rule set.
// Where llama.cpp rewrote a tokenizer.json regex (e.g. `(?i:'s|...)` -> `'[sS]|...`), the
// ORIGINAL tokenizer.json semantics are reproduced (they differ only on rare code points
// such as U+017F LATIN SMALL LETTER LONG S after an apostrophe).
enum class PreTokenizer : uint8_t {
  kDefault,        // "default" (llama.cpp's fallback for BPE): punctuation runs, GPT-2, digit runs,
                   // triples
  kGpt2,           // GPT-2 byte-level regex
  kLlama3,         // Llama 3 / tiktoken cl100k style, digits in groups of up to 3
  kQwen2,          // as kLlama3 but single digits
  kQwen35,         // as kQwen2 with combining marks joined to letters
  kStarcoder,      // single digits, then GPT-2
  kDeepseekCoder,  // newline, letters, punctuation, CJK runs, single digits
  kDeepseekLlm,    // newline, Latin-ish letters, ASCII/fullwidth punctuation, trailing space, CJK,
                   // numbers
  kDeepseekV3,     // digits up to 3, CJK/kana runs, then the DeepSeek V3 regex
  kFalcon,         // punctuation runs, GPT-2, digit triples
  kPoro,           // ` ?[^(\s|.,!?…。，、।۔،)]+`
  kViking,         // kPoro, then single digits
  kTekken,         // Mistral tekken: case-split words (o200k-like), single digits
  kGpt4o,          // o200k: case-split words with contraction suffix, digits up to 3
  kSeedCoder,      // as kQwen2 but no newline run after punctuation
  kMinicpm5,       // digits up to 3, then the llama3 regex with \p{N}+
  kNewlineRuns,    // `[^\n]+|[\n]+` (SPM-style BPE such as Gemma 4: no word splitting)
  kLaguna,         // kNewlineRuns, then kQwen2
  kWhitespace,     // `\S+` (whitespace runs stay as separate pieces)
};

// Maps a GGUF `tokenizer.ggml.pre` value to its rule set; nullopt for an unknown name.
// An absent key is the caller's business (llama.cpp treats it as "default").
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view gguf_pre);

// A short stable name for logs and test output ("gpt2", "llama3", ...).
std::string_view pre_tokenizer_name(PreTokenizer kind);

// Splits `text` into consecutive non-empty pieces whose concatenation is exactly `text`.
// `words` is cleared first; the views point into `text` (the caller keeps it alive).
// Invalid UTF-8 never fails: each bad byte counts as one U+FFFD code point of one byte.
// Thread-safe (scratch buffers are thread_local), no allocation after warm-up except growth
// of `words`.
void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& words);

}  // namespace cera::tokenizer
