// Element types of gpuos tensors and scalar attributes.
//
// Names are the short forms used in operator packs and on the command line:
// f32 f16 bf16 f64 i8 u8 i32 i64 bool.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuos {

// Values are part of the device ABI (device/include/gpuos/device/abi.h mirrors
// them); append only.
enum class DType : int {
  kF32 = 0,
  kF16 = 1,
  kBF16 = 2,
  kF64 = 3,
  kI8 = 4,
  kU8 = 5,
  kI32 = 6,
  kI64 = 7,
  kBool = 8,
};

inline constexpr int kNumDTypes = 9;

// Every dtype, in enum order.
const std::vector<DType>& AllDTypes();

// "f32" for kF32 and so on.
const char* DTypeName(DType dtype);

// Parses a short name ("f32", "bool"); nullopt for anything else.
std::optional<DType> ParseDType(std::string_view name);

// Size of one element in bytes.
std::size_t DTypeSize(DType dtype);

bool IsFloatingPoint(DType dtype);

// The C++ spelling used in generated device code ("float", "__half", ...).
const char* DTypeCudaType(DType dtype);

}  // namespace gpuos
