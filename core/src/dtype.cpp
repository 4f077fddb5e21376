#include "gpuos/dtype.h"

#include <array>

namespace gpuos {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
  bool floating;
  const char* cuda_type;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {DType::kF32, "f32", 4, true, "float"},
    {DType::kF16, "f16", 2, true, "__half"},
    {DType::kBF16, "bf16", 2, true, "__nv_bfloat16"},
    {DType::kF64, "f64", 8, true, "double"},
    {DType::kI8, "i8", 1, false, "signed char"},
    {DType::kU8, "u8", 1, false, "unsigned char"},
    {DType::kI32, "i32", 4, false, "int"},
    {DType::kI64, "i64", 8, false, "long long"},
    {DType::kBool, "bool", 1, false, "bool"},
}};

const DTypeInfo& Info(DType dtype) { return kInfo[static_cast<int>(dtype)]; }

}  // namespace

const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> v;
    for (const auto& info : kInfo) v.push_back(info.dtype);
    return v;
  }();
  return all;
}

const char* DTypeName(DType dtype) { return Info(dtype).name; }

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& info : kInfo) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

std::size_t DTypeSize(DType dtype) { return Info(dtype).size; }

bool IsFloatingPoint(DType dtype) { return Info(dtype).floating; }

const char* DTypeCudaType(DType dtype) { return Info(dtype).cuda_type; }

}  // namespace gpuos
