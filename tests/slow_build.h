// Is this a sanitizer or Debug build, whose CPU code runs 10-20x slower than Release? Tests that
// scale with their inputs run fewer of them there (the same code paths); the release suite runs
// them whole. (The 64-request engine test alone took 133 s under ASan + UBSan on a 2-core machine.)
#pragma once

namespace cera::test {

#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
inline constexpr bool kSlowBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSlowBuild = true;
#else
inline constexpr bool kSlowBuild = false;
#endif
#else
inline constexpr bool kSlowBuild = false;
#endif

}  // namespace cera::test
