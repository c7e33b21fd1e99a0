// Matchers for the whole-word regexes (GPT-2, Llama 3 / Qwen family, o200k / tekken, DeepSeek V3).
// Each alternative is tried in the regex's order and greedy backtracking is resolved by hand:
// e.g. `\s*[\r\n]+` ends right after the LAST \r or \n of the whitespace run.
#include <algorithm>

#include "tokenizer/pretokenize/matchers.h"

namespace cera::tokenizer::pretok {
namespace {

// Length of `'s|'t|'re|'ve|'m|'ll|'d` at i (0 when none). any_case gives `(?i:...)`, whose
// Unicode case folding also lets U+017F LATIN SMALL LETTER LONG S match `s`.
size_t contraction(const CpText& t, size_t i, size_t end, bool any_case) {
  if (i + 1 >= end || t.cp[i] != '\'') return 0;
  auto fold = [&](size_t j) -> uint32_t {
    const uint32_t c = t.cp[j];
    if (!any_case) return c;
    if (c >= 'A' && c <= 'Z') return c + 32;
    return c == 0x17F ? 's' : c;
  };
  switch (fold(i + 1)) {
    case 's':
    case 't':
    case 'm':
    case 'd':
      return 2;
    case 'r':
    case 'v':
      return (i + 2 < end && fold(i + 2) == 'e') ? 3 : 0;
    case 'l':
      return (i + 2 < end && fold(i + 2) == 'l') ? 3 : 0;
    default:
      return 0;
  }
}

// `\s+(?!\S)|\s+` at a whitespace code point i: the whole run when it reaches the piece end,
// else the run minus its last code point (which then leads the next word), at least one.
size_t space_run(const CpText& t, size_t i, size_t end) {
  const size_t k = t.run_of(i, end, kSpace);
  if (k == end || k - i == 1) return k;
  return k - 1;
}

// `\s*[\r\n]+|\s+(?!\S)|\s+` at a whitespace code point i.
size_t space_run_with_newlines(const CpText& t, size_t i, size_t end) {
  const size_t k = t.run_of(i, end, kSpace);
  for (size_t p = k; p > i; --p) {
    if (t.is_crlf(p - 1)) return p;
  }
  return (k == end || k - i == 1) ? k : k - 1;
}

size_t newline_tail(const CpText& t, size_t k, size_t end, bool with_slash) {
  while (k < end && (t.is_crlf(k) || (with_slash && t.cp[k] == '/'))) ++k;
  return k;
}

bool is_other(const CpText& t, size_t i, uint8_t not_other) {
  return (t.cls[i] & not_other) == 0;
}

}  // namespace

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
static size_t match_gpt2(const CpText& t, size_t i, size_t end) {
  if (const size_t n = contraction(t, i, end, false)) return i + n;
  const bool space = t.cp[i] == ' ' && i + 1 < end;
  for (uint8_t cls : {kLetter, kNumber}) {
    if (space && t.has(i + 1, cls)) return t.run_of(i + 1, end, cls);
    if (t.has(i, cls)) return t.run_of(i, end, cls);
  }
  constexpr uint8_t kNotOther = kSpace | kLetter | kNumber;
  auto other = [&](size_t j) { return is_other(t, j, kNotOther); };
  if (space && other(i + 1)) return t.run(i + 1, end, other);
  if (other(i)) return t.run(i, end, other);
  return space_run(t, i, end);
}

namespace {

// The Llama 3 / Qwen 2 family:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?LETTERS+|\p{N}{1,MAX}|
// ?OTHER+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ LETTERS is \p{L} ([\p{L}\p{M}] for Qwen 3.5), OTHER is
// [^\s\p{L}\p{N}] (also minus \p{M} for Qwen 3.5); seed-coder has no [\r\n]* after OTHER+.
struct WordRules {
  size_t max_digits;
  bool marks_are_letters;
  bool newlines_after_other;
};

size_t match_words(const CpText& t, size_t i, size_t end, const WordRules& r) {
  if (const size_t n = contraction(t, i, end, true)) return i + n;
  const uint8_t letters = r.marks_are_letters ? (kLetter | kMark) : kLetter;
  if (t.has(i, letters)) return t.run_of(i, end, letters);
  if (!t.is_crlf(i) && !t.has(i, kLetter | kNumber) && i + 1 < end && t.has(i + 1, letters)) {
    return t.run_of(i + 1, end, letters);
  }
  if (t.has(i, kNumber)) return std::min(t.run_of(i, end, kNumber), i + r.max_digits);
  const uint8_t not_other = kSpace | kLetter | kNumber | (r.marks_are_letters ? kMark : 0);
  auto other = [&](size_t j) { return is_other(t, j, not_other); };
  const size_t start = (t.cp[i] == ' ' && i + 1 < end && other(i + 1)) ? i + 1 : i;
  if (other(start)) {
    const size_t k = t.run(start, end, other);
    return r.newlines_after_other ? newline_tail(t, k, end, false) : k;
  }
  return space_run_with_newlines(t, i, end);
}

constexpr size_t kUnbounded = static_cast<size_t>(-1) / 2;

}  // namespace

static size_t match_llama3(const CpText& t, size_t i, size_t end) {
  return match_words(t, i, end,
                     {.max_digits = 3, .marks_are_letters = false, .newlines_after_other = true});
}
static size_t match_qwen2(const CpText& t, size_t i, size_t end) {
  return match_words(t, i, end,
                     {.max_digits = 1, .marks_are_letters = false, .newlines_after_other = true});
}
static size_t match_qwen35(const CpText& t, size_t i, size_t end) {
  return match_words(t, i, end,
                     {.max_digits = 1, .marks_are_letters = true, .newlines_after_other = true});
}
static size_t match_seed_coder(const CpText& t, size_t i, size_t end) {
  return match_words(t, i, end,
                     {.max_digits = 1, .marks_are_letters = false, .newlines_after_other = false});
}
static size_t match_minicpm5(const CpText& t, size_t i, size_t end) {
  return match_words(
      t, i, end,
      {.max_digits = kUnbounded, .marks_are_letters = false, .newlines_after_other = true});
}

namespace {

// o200k / tekken, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and W = [\p{Ll}\p{Lm}\p{Lo}\p{M}]:
// [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,MAX}|
// ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ where C is (?i:'s|'t|'re|'ve|'m|'ll|'d) for
// o200k and absent for tekken.
struct CasedRules {
  size_t max_digits;
  bool contraction_suffix;
};

constexpr size_t kNoMatch = static_cast<size_t>(-1);

// U*W+ at a. U* is greedy; when the code point after the U run is not in W, U* gives back
// code points until one in W (one in both classes: Lm, Lo or a mark) can start W+.
size_t upper_then_lower(const CpText& t, size_t a, size_t end) {
  const size_t b = t.run_of(a, end, kUpperish);
  if (b < end && t.has(b, kLowerish)) return t.run_of(b, end, kLowerish);
  for (size_t p = b; p > a; --p) {
    if (t.has(p - 1, kLowerish)) return p;
  }
  return kNoMatch;
}

// U+W* at a.
size_t upper_run_then_lower(const CpText& t, size_t a, size_t end) {
  const size_t b = t.run_of(a, end, kUpperish);
  return b == a ? kNoMatch : t.run_of(b, end, kLowerish);
}

size_t match_cased(const CpText& t, size_t i, size_t end, const CasedRules& r) {
  const bool prefix = !t.is_crlf(i) && !t.has(i, kLetter | kNumber) && i + 1 < end;
  size_t m = kNoMatch;
  if (prefix) m = upper_then_lower(t, i + 1, end);
  if (m == kNoMatch) m = upper_then_lower(t, i, end);
  if (m == kNoMatch && prefix) m = upper_run_then_lower(t, i + 1, end);
  if (m == kNoMatch) m = upper_run_then_lower(t, i, end);
  if (m != kNoMatch) return r.contraction_suffix ? m + contraction(t, m, end, true) : m;

  if (t.has(i, kNumber)) return std::min(t.run_of(i, end, kNumber), i + r.max_digits);
  constexpr uint8_t kNotOther = kSpace | kLetter | kNumber;
  auto other = [&](size_t j) { return is_other(t, j, kNotOther); };
  const size_t start = (t.cp[i] == ' ' && i + 1 < end && other(i + 1)) ? i + 1 : i;
  if (other(start)) return newline_tail(t, t.run(start, end, other), end, true);
  return space_run_with_newlines(t, i, end);
}

}  // namespace

static size_t match_tekken(const CpText& t, size_t i, size_t end) {
  return match_cased(t, i, end, {.max_digits = 1, .contraction_suffix = false});
}
static size_t match_gpt4o(const CpText& t, size_t i, size_t end) {
  return match_cased(t, i, end, {.max_digits = 3, .contraction_suffix = true});
}

// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//  ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Unlike the others this regex has no \p{N} branch: a lone digit stays unmatched (the first
// stage of the DeepSeek V3 sequence has already isolated digit groups).
static size_t match_deepseek_v3(const CpText& t, size_t i, size_t end) {
  const uint32_t c = t.cp[i];
  auto ascii_alpha = [&](size_t j) {
    const uint32_t x = t.cp[j] | 0x20;
    return x >= 'a' && x <= 'z';
  };
  const bool ascii_punct = c < 0x80 && t.has(i, kPunct | kSymbol);
  if (ascii_punct && i + 1 < end && ascii_alpha(i + 1)) return t.run(i + 1, end, ascii_alpha);
  constexpr uint8_t kWord = kLetter | kMark;
  if (!t.is_crlf(i) && !t.has(i, kLetter | kPunct | kSymbol) && i + 1 < end &&
      t.has(i + 1, kWord)) {
    return t.run_of(i + 1, end, kWord);
  }
  if (t.has(i, kWord)) return t.run_of(i, end, kWord);
  constexpr uint8_t kPs = kPunct | kSymbol;
  if (c == ' ' && i + 1 < end && t.has(i + 1, kPs))
    return newline_tail(t, t.run_of(i + 1, end, kPs), end, false);
  if (t.has(i, kPs)) return newline_tail(t, t.run_of(i, end, kPs), end, false);
  if (t.has(i, kSpace)) return space_run_with_newlines(t, i, end);
  return i;
}

// Stages: each instantiates the scan loop with its matcher inlined.
void stage_gpt2(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_gpt2>(t, in, out);
}
void stage_llama3(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_llama3>(t, in, out);
}
void stage_qwen2(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_qwen2>(t, in, out);
}
void stage_qwen35(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_qwen35>(t, in, out);
}
void stage_seed_coder(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_seed_coder>(t, in, out);
}
void stage_minicpm5(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_minicpm5>(t, in, out);
}
void stage_tekken(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_tekken>(t, in, out);
}
void stage_gpt4o(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_gpt4o>(t, in, out);
}
void stage_deepseek_v3(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_deepseek_v3>(t, in, out);
}

}  // namespace cera::tokenizer::pretok
