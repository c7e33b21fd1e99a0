// GGUF metadata values: packed arrays, element access and the typed conversions behind
// GgufFile::get<T>. Integer conversions are range-checked rather than cast, because files in
// the wild disagree on u32 versus i32 for the same key and silent wrap-around hides bugs.
#include <cmath>
#include <limits>

#include "format/gguf.h"

namespace cera::format {

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "unknown";
}

uint32_t gguf_scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

uint64_t GgufArray::size() const {
  const uint32_t s = gguf_scalar_size(element_type);
  return s == 0 ? values.size() : packed.size() / s;
}

namespace {
template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace

GgufValue GgufArray::at(uint64_t i) const {
  const uint32_t s = gguf_scalar_size(element_type);
  if (s == 0) return values[i];
  const uint8_t* p = packed.data() + i * s;
  switch (element_type) {
    case GgufType::kUint8: return {load<uint8_t>(p)};
    case GgufType::kInt8: return {load<int8_t>(p)};
    case GgufType::kUint16: return {load<uint16_t>(p)};
    case GgufType::kInt16: return {load<int16_t>(p)};
    case GgufType::kUint32: return {load<uint32_t>(p)};
    case GgufType::kInt32: return {load<int32_t>(p)};
    case GgufType::kFloat32: return {load<float>(p)};
    case GgufType::kBool: return {*p != 0};
    case GgufType::kUint64: return {load<uint64_t>(p)};
    case GgufType::kInt64: return {load<int64_t>(p)};
    case GgufType::kFloat64: return {load<double>(p)};
    default: return {};
  }
}

GgufArray GgufArray::of_strings(std::vector<std::string> strings) {
  GgufArray a;
  a.element_type = GgufType::kString;
  a.values.reserve(strings.size());
  for (auto& s : strings) a.values.push_back({std::move(s)});
  return a;
}

std::optional<int64_t> GgufValue::as_int() const {
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, uint64_t>) {
          if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(x);
        } else if constexpr (std::is_integral_v<X>) {
          return static_cast<int64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      v);
}

std::optional<double> GgufValue::as_double() const {
  return std::visit(
      [](const auto& x) -> std::optional<double> {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<X> && !std::is_same_v<X, bool>) {
          return static_cast<double>(x);
        } else {
          return std::nullopt;
        }
      },
      v);
}

template <class T>
Result<T> gguf_value_as(const GgufValue& value, std::string_view what) {
  auto mismatch = [&](std::string_view expected) {
    return invalid_argument(std::string(what) + ": expected " + std::string(expected) + ", found " +
                            std::string(gguf_type_name(value.type())));
  };
  if constexpr (std::is_same_v<T, std::string>) {
    if (const std::string* s = value.string()) return *s;
    return mismatch("string");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (const bool* b = std::get_if<bool>(&value.v)) return *b;
    return mismatch("bool");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (value.type() == GgufType::kBool) return mismatch("a number");
    if (auto d = value.as_double()) return static_cast<T>(*d);
    return mismatch("a number");
  } else {
    static_assert(std::is_integral_v<T>);
    if (value.type() == GgufType::kBool || value.type() == GgufType::kFloat32 ||
        value.type() == GgufType::kFloat64) {
      return mismatch("an integer");
    }
    if (const uint64_t* u = std::get_if<uint64_t>(&value.v)) {
      if (*u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return out_of_range(std::string(what) + ": value " + std::to_string(*u) +
                            " does not fit the expected integer type");
      }
      return static_cast<T>(*u);
    }
    auto i = value.as_int();
    if (!i) return mismatch("an integer");
    if (*i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (*i > 0 && static_cast<uint64_t>(*i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
      return out_of_range(std::string(what) + ": value " + std::to_string(*i) +
                          " does not fit the expected integer type");
    }
    return static_cast<T>(*i);
  }
}

#define CERA_GGUF_INSTANTIATE(T) template Result<T> gguf_value_as<T>(const GgufValue&, std::string_view);
CERA_GGUF_ACCESSOR_TYPES(CERA_GGUF_INSTANTIATE)
#undef CERA_GGUF_INSTANTIATE

}  // namespace cera::format
