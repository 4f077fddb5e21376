// Element types on the device: their DTypeCode, the type arithmetic is done
// in (`compute_t`: float for __half and __nv_bfloat16, the type itself
// otherwise), conversions between them, and numeric limits.
//
// Device code only (NVRTC). cuda_fp16.h and cuda_bf16.h come from the CUDA
// toolkit found at run time (docs/jit.md, "Toolkit headers").
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpuos/device/abi.h"

namespace gpuos {
namespace device {

template <typename T>
struct DTypeTraits;

#define GPUOS_DEVICE_DTYPE_(type, code, compute) \
  template <>                                    \
  struct DTypeTraits<type> {                     \
    static constexpr int kCode = code;           \
    using compute_type = compute;                \
  };
GPUOS_DEVICE_DTYPE_(float, kDTypeF32, float)
GPUOS_DEVICE_DTYPE_(__half, kDTypeF16, float)
GPUOS_DEVICE_DTYPE_(__nv_bfloat16, kDTypeBF16, float)
GPUOS_DEVICE_DTYPE_(double, kDTypeF64, double)
GPUOS_DEVICE_DTYPE_(signed char, kDTypeI8, signed char)
GPUOS_DEVICE_DTYPE_(unsigned char, kDTypeU8, unsigned char)
GPUOS_DEVICE_DTYPE_(int, kDTypeI32, int)
GPUOS_DEVICE_DTYPE_(long long, kDTypeI64, long long)
GPUOS_DEVICE_DTYPE_(bool, kDTypeBool, bool)
#undef GPUOS_DEVICE_DTYPE_

template <typename T>
using compute_type_t = typename DTypeTraits<T>::compute_type;

template <typename T>
struct RemoveConst {
  using type = T;
};
template <typename T>
struct RemoveConst<const T> {
  using type = T;
};

// Convert<To>::Apply(value): value converted to To. Half and bfloat16 go
// through float (round to nearest even); everything else is static_cast.
template <typename To>
struct Convert {
  template <typename From>
  __device__ __forceinline__ static To Apply(From value) {
    return static_cast<To>(value);
  }
  __device__ __forceinline__ static To Apply(__half value) {
    return static_cast<To>(__half2float(value));
  }
  __device__ __forceinline__ static To Apply(__nv_bfloat16 value) {
    return static_cast<To>(__bfloat162float(value));
  }
};

template <>
struct Convert<__half> {
  template <typename From>
  __device__ __forceinline__ static __half Apply(From value) {
    return __float2half_rn(static_cast<float>(value));
  }
  __device__ __forceinline__ static __half Apply(__half value) { return value; }
  __device__ __forceinline__ static __half Apply(__nv_bfloat16 value) {
    return __float2half_rn(__bfloat162float(value));
  }
};

template <>
struct Convert<__nv_bfloat16> {
  template <typename From>
  __device__ __forceinline__ static __nv_bfloat16 Apply(From value) {
    return __float2bfloat16_rn(static_cast<float>(value));
  }
  __device__ __forceinline__ static __nv_bfloat16 Apply(__nv_bfloat16 value) { return value; }
  __device__ __forceinline__ static __nv_bfloat16 Apply(__half value) {
    return __float2bfloat16_rn(__half2float(value));
  }
};

template <typename To, typename From>
__device__ __forceinline__ To convert(From value) {
  return Convert<To>::Apply(value);
}

// Numeric limits of the compute types (no <limits> under NVRTC). Unlike
// std::numeric_limits, lowest()/highest() of a floating type are -inf/+inf:
// they are the identities of max and min.
template <typename T>
struct Limits;
#define GPUOS_DEVICE_LIMITS_(type, lowest_value, highest_value)                \
  template <>                                                                  \
  struct Limits<type> {                                                        \
    __device__ __forceinline__ static type lowest() { return lowest_value; }   \
    __device__ __forceinline__ static type highest() { return highest_value; } \
  };
GPUOS_DEVICE_LIMITS_(float, __int_as_float(static_cast<int>(0xff800000u)),
                     __int_as_float(0x7f800000))
GPUOS_DEVICE_LIMITS_(double, __longlong_as_double(static_cast<long long>(0xfff0000000000000ULL)),
                     __longlong_as_double(0x7ff0000000000000LL))
GPUOS_DEVICE_LIMITS_(signed char, -128, 127)
GPUOS_DEVICE_LIMITS_(unsigned char, 0, 255)
GPUOS_DEVICE_LIMITS_(int, -2147483647 - 1, 2147483647)
GPUOS_DEVICE_LIMITS_(long long, -9223372036854775807LL - 1, 9223372036854775807LL)
GPUOS_DEVICE_LIMITS_(bool, false, true)
#undef GPUOS_DEVICE_LIMITS_

}  // namespace device

// Spellings for operator code: gpuos::lowest<compute_t>() is the identity of
// max (-inf for floating types, the minimum for integers),
// gpuos::highest<compute_t>() that of min.
template <typename T>
__device__ __forceinline__ T lowest() {
  return device::Limits<T>::lowest();
}
template <typename T>
__device__ __forceinline__ T highest() {
  return device::Limits<T>::highest();
}

}  // namespace gpuos
