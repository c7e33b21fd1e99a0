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
// (each matcher file instantiates it for its own matchers): measured ~2x on multi-stage
// sequences (deepseek-llm 39 -> 110 MB/s, default 70 -> 134 MB/s on ASCII).
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

using Pieces = std::vector<Span>;
using Stage = void (*)(const CpText& t, const Pieces& in, Pieces& out);

// Whole-word regexes (matchers_words.cpp); the regex each implements is quoted there.
void stage_gpt2(const CpText&, const Pieces&, Pieces&);
void stage_llama3(const CpText&, const Pieces&, Pieces&);
void stage_qwen2(const CpText&, const Pieces&, Pieces&);
void stage_qwen35(const CpText&, const Pieces&, Pieces&);
void stage_seed_coder(const CpText&, const Pieces&, Pieces&);
void stage_minicpm5(const CpText&, const Pieces&, Pieces&);
void stage_tekken(const CpText&, const Pieces&, Pieces&);
void stage_gpt4o(const CpText&, const Pieces&, Pieces&);
void stage_deepseek_v3(const CpText&, const Pieces&, Pieces&);

// Single-class stages of regex sequences (matchers_stages.cpp).
void stage_punct_run_default(const CpText&, const Pieces&, Pieces&);   // [\p{P}\$\+<=>\^~\|]+
void stage_punct_run_falcon(const CpText&, const Pieces&, Pieces&);    // [\p{P}\$\+<=>\^~\|`]+
void stage_number(const CpText&, const Pieces&, Pieces&);              // \p{N}
void stage_numbers(const CpText&, const Pieces&, Pieces&);             // \p{N}+
void stage_numbers_1_3(const CpText&, const Pieces&, Pieces&);         // \p{N}{1,3}
void stage_ascii_digit_triple(const CpText&, const Pieces&, Pieces&);  // [0-9][0-9][0-9]
void stage_cr_or_lf(const CpText&, const Pieces&, Pieces&);            // [\r\n]
void stage_space_letters(const CpText&, const Pieces&, Pieces&);       // \s?\p{L}+
void stage_space_punct(const CpText&, const Pieces&, Pieces&);         // \s?\p{P}+
void stage_cjk_hangul_run(const CpText&, const Pieces&, Pieces&);      // [一-龥ࠀ-一가-퟿]+
void stage_cjk_kana_run(const CpText&, const Pieces&, Pieces&);        // [一-龥぀-ゟ゠-ヿ]+
void stage_deepseek_letters(const CpText&, const Pieces&, Pieces&);    // \s?[A-Za-zµÀ-Ö...]+
// \s?[!-/:-~！-／：-～‘-‟　-。]+
void stage_deepseek_punct(const CpText&, const Pieces&, Pieces&);
void stage_trailing_space(const CpText&, const Pieces&, Pieces&);  // \s+$
void stage_poro(const CpText&, const Pieces&, Pieces&);  // ' ?[^(\s|.,!?…。，、।۔،)]+'
void stage_newline_runs(const CpText&, const Pieces&, Pieces&);   // [^\n]+|[\n]+
void stage_non_space_run(const CpText&, const Pieces&, Pieces&);  // \S+

}  // namespace cera::tokenizer::pretok
