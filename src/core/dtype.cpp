// Table of GGUF tensor types (and the engine-internal ones) and size arithmetic.
#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace rf {
namespace {

struct Entry {
  DType type;
  DTypeInfo info;
};

constexpr Entry kTypes[] = {
    {DType::F32, {"f32", 1, 4, false}},
    {DType::F16, {"f16", 1, 2, false}},
    {DType::Q4_0, {"q4_0", 32, 18, true}},
    {DType::Q4_1, {"q4_1", 32, 20, true}},
    {DType::Q5_0, {"q5_0", 32, 22, true}},
    {DType::Q5_1, {"q5_1", 32, 24, true}},
    {DType::Q8_0, {"q8_0", 32, 34, true}},
    {DType::Q8_1, {"q8_1", 32, 36, true}},
    {DType::Q2_K, {"q2_K", 256, 84, true}},
    {DType::Q3_K, {"q3_K", 256, 110, true}},
    {DType::Q4_K, {"q4_K", 256, 144, true}},
    {DType::Q5_K, {"q5_K", 256, 176, true}},
    {DType::Q6_K, {"q6_K", 256, 210, true}},
    {DType::Q8_K, {"q8_K", 256, 292, true}},
    {DType::IQ2_XXS, {"iq2_xxs", 256, 66, true}},
    {DType::IQ2_XS, {"iq2_xs", 256, 74, true}},
    {DType::IQ3_XXS, {"iq3_xxs", 256, 98, true}},
    {DType::IQ1_S, {"iq1_s", 256, 50, true}},
    {DType::IQ4_NL, {"iq4_nl", 32, 18, true}},
    {DType::IQ3_S, {"iq3_s", 256, 110, true}},
    {DType::IQ2_S, {"iq2_s", 256, 82, true}},
    {DType::IQ4_XS, {"iq4_xs", 256, 136, true}},
    {DType::IQ1_M, {"iq1_m", 256, 56, true}},
    {DType::MXFP4, {"mxfp4", 32, 17, true}},
    {DType::I8, {"i8", 1, 1, false}},
    {DType::I16, {"i16", 1, 2, false}},
    {DType::I32, {"i32", 1, 4, false}},
    {DType::I64, {"i64", 1, 8, false}},
    {DType::F64, {"f64", 1, 8, false}},
    {DType::BF16, {"bf16", 1, 2, false}},
    {DType::F8_E4M3_ROW, {"f8_e4m3_row", 32, 32, true, 16}},
};

constexpr Entry kEngineTypes[] = {
    {DType::F8_E4M3, {"f8_e4m3", 1, 1, false}},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  for (const auto& e : kTypes)
    if (uint32_t(e.type) == id) return e.info;
  return std::nullopt;
}

const DTypeInfo& info(DType t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.info;
  for (const auto& e : kEngineTypes)
    if (e.type == t) return e.info;
  fail("unknown dtype id ", uint32_t(t));
}

std::optional<DType> dtype_from_name(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
    return r;
  };
  const std::string want = lower(name);
  for (const auto& e : kTypes)
    if (lower(e.info.name) == want) return e.type;
  return std::nullopt;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

size_t row_bytes(DType t, uint64_t n) {
  const DTypeInfo& i = info(t);
  RF_CHECK(n % i.block_size == 0, i.name, ": ", n, " elements is not a multiple of the block size ",
           i.block_size);
  uint64_t bytes;
  RF_CHECK(!mul_overflows(n / i.block_size, i.type_size, &bytes) && !add_overflows(bytes, i.row_header, &bytes),
           "tensor size overflows");
  return size_t(bytes);
}

}  // namespace rf
