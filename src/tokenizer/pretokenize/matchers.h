// Internal to the pre-tokenizers: one matcher per regex. A matcher tries to match its regex
// at code point i of a piece that ends at `end` (the regex never sees past the piece: `$` and
// `(?!\S)` look at the piece end, as when llama.cpp/HF run each stage on each piece) and
// returns the end of the match, or i when the regex does not match at i (matches are never
// empty). The driver implements the leftmost search, so a matcher only answers "here?".
#pragma once

#include <cstddef>

#include "tokenizer/pretokenize/cp_text.h"

namespace cera::tokenizer::pretok {

using Matcher = size_t (*)(const CpText& t, size_t i, size_t end);

// Whole-word regexes (matchers_words.cpp); the regex each implements is quoted there.
size_t match_gpt2(const CpText& t, size_t i, size_t end);
size_t match_llama3(const CpText& t, size_t i, size_t end);
size_t match_qwen2(const CpText& t, size_t i, size_t end);
size_t match_qwen35(const CpText& t, size_t i, size_t end);
size_t match_seed_coder(const CpText& t, size_t i, size_t end);
size_t match_minicpm5(const CpText& t, size_t i, size_t end);
size_t match_tekken(const CpText& t, size_t i, size_t end);
size_t match_gpt4o(const CpText& t, size_t i, size_t end);
size_t match_deepseek_v3(const CpText& t, size_t i, size_t end);

// Single-class stages of regex sequences (matchers_stages.cpp).
size_t match_punct_run_default(const CpText& t, size_t i, size_t end);  // [\p{P}\$\+<=>\^~\|]+
size_t match_punct_run_falcon(const CpText& t, size_t i, size_t end);   // [\p{P}\$\+<=>\^~\|`]+
size_t match_number(const CpText& t, size_t i, size_t end);             // \p{N}
size_t match_numbers(const CpText& t, size_t i, size_t end);            // \p{N}+
size_t match_numbers_1_3(const CpText& t, size_t i, size_t end);        // \p{N}{1,3}
size_t match_ascii_digit_triple(const CpText& t, size_t i, size_t end); // [0-9][0-9][0-9]
size_t match_cr_or_lf(const CpText& t, size_t i, size_t end);           // [\r\n]
size_t match_space_letters(const CpText& t, size_t i, size_t end);      // \s?\p{L}+
size_t match_space_punct(const CpText& t, size_t i, size_t end);        // \s?\p{P}+
size_t match_cjk_hangul_run(const CpText& t, size_t i, size_t end);     // [一-龥ࠀ-一가-퟿]+
size_t match_cjk_kana_run(const CpText& t, size_t i, size_t end);       // [一-龥぀-ゟ゠-ヿ]+
size_t match_deepseek_letters(const CpText& t, size_t i, size_t end);   // \s?[A-Za-zµÀ-Ö...]+
size_t match_deepseek_punct(const CpText& t, size_t i, size_t end);     // \s?[!-/:-~！-／：-～‘-‟　-。]+
size_t match_trailing_space(const CpText& t, size_t i, size_t end);     // \s+$
size_t match_poro(const CpText& t, size_t i, size_t end);               // ' ?[^(\s|.,!?…。，、।۔،)]+'
size_t match_newline_runs(const CpText& t, size_t i, size_t end);       // [^\n]+|[\n]+
size_t match_non_space_run(const CpText& t, size_t i, size_t end);      // \S+

}  // namespace cera::tokenizer::pretok
