// Internal to the pre-tokenizers: one matcher per regex, run as a stage over pieces. A matcher
// tries its regex at code point i of a piece that ends at `end` (the regex never sees past the
// piece: `$` and `(?!\S)` look at the piece end, as when llama.cpp/HF run each stage on each
// piece) and returns the match end, or i for no match (matches are never empty); run_stage
// does the leftmost search, so a matcher only answers "does it match here?".
#pragma once

#include <cstddef>
#include <vector>

#include "tokenizer/pretokenize/cp_text.h"

namespace cera::tokenizer::pretok {

// Tries one regex at code point i of a piece ending at `end`: the match end, or i for none.
using Matcher = size_t (*)(const CpText& t, size_t i, size_t end);

// One stage of a regex sequence: the leftmost-first search of the regex inside every input
// piece; matches and the gaps between them are appended to `out` in order, so they tile the
// input pieces exactly. A template over the matcher so the matcher inlines into the scan loop
// (each matcher file instantiates it for its own matchers; ~1.5x on multi-stage sequences).
template <Matcher Match>
void run_stage(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out) {
  for (const Span piece : in) {
    size_t gap = piece.begin;
    size_t i = piece.begin;
    while (i < piece.end) {
      const size_t e = Match(t, i, piece.end);
      if (e > i) {
        if (gap < i) out.push_back({gap, i});
        out.push_back({i, e});
        i = gap = e;
      } else {
        ++i;
      }
    }
    if (gap < piece.end) out.push_back({gap, piece.end});
  }
}

using Stage = void (*)(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);

// Whole-word regexes (matchers_words.cpp); the regex each implements is quoted there.
void stage_gpt2(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_llama3(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_qwen2(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_qwen35(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_seed_coder(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_minicpm5(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_tekken(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_gpt4o(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);
void stage_deepseek_v3(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);

// Single-class stages of regex sequences (matchers_stages.cpp).
void stage_punct_run_default(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);  // [\p{P}\$\+<=>\^~\|]+
void stage_punct_run_falcon(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);   // [\p{P}\$\+<=>\^~\|`]+
void stage_number(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);             // \p{N}
void stage_numbers(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);            // \p{N}+
void stage_numbers_1_3(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);        // \p{N}{1,3}
void stage_ascii_digit_triple(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out); // [0-9][0-9][0-9]
void stage_cr_or_lf(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);           // [\r\n]
void stage_space_letters(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);      // \s?\p{L}+
void stage_space_punct(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);        // \s?\p{P}+
void stage_cjk_hangul_run(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);     // [一-龥ࠀ-一가-퟿]+
void stage_cjk_kana_run(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);       // [一-龥぀-ゟ゠-ヿ]+
void stage_deepseek_letters(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);   // \s?[A-Za-zµÀ-Ö...]+
void stage_deepseek_punct(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);     // \s?[!-/:-~！-／：-～‘-‟　-。]+
void stage_trailing_space(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);     // \s+$
void stage_poro(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);               // ' ?[^(\s|.,!?…。，、।۔،)]+'
void stage_newline_runs(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);       // [^\n]+|[\n]+
void stage_non_space_run(const CpText& t, const std::vector<Span>& in, std::vector<Span>& out);      // \S+

}  // namespace cera::tokenizer::pretok
