// A minimal host side for running kernel images in tests: host tensors with
// any dtype and strided views, and a session that loads an image with the
// driver API and runs the one-shot worker on a list of tasks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "gpuos/cuda_driver.h"
#include "gpuos/device/abi.h"
#include "gpuos/registry/jit_builder.h"

namespace gpuos::registry::testing {

// IEEE binary16 / bfloat16 from float, round to nearest even.
inline std::uint16_t FloatToHalfBits(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const int raw_exponent = static_cast<int>((x >> 23) & 0xffu);
  std::uint32_t mantissa = x & 0x7fffffu;
  if (raw_exponent == 0xff)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  const int exponent = raw_exponent - 127 + 15;
  if (exponent >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exponent <= 0) {
    if (exponent < -10) return static_cast<std::uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(exponent) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(half);
}

inline float HalfBitsToFloat(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(1.0f + static_cast<float>(mantissa) / 1024.0f, exponent - 15);
  }
  return (bits & 0x8000) ? -value : value;
}

inline std::uint16_t FloatToBf16Bits(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, 4);
  if (std::isnan(value)) return 0x7fc0;
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

inline float Bf16BitsToFloat(std::uint16_t bits) {
  const std::uint32_t x = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &x, 4);
  return value;
}

// Writes `value` as one element of `dtype` at `out`.
inline void EncodeElement(DType dtype, double value, unsigned char* out) {
  auto put = [&](auto v) { std::memcpy(out, &v, sizeof(v)); };
  switch (dtype) {
    case DType::kF32:
      put(static_cast<float>(value));
      break;
    case DType::kF16:
      put(FloatToHalfBits(static_cast<float>(value)));
      break;
    case DType::kBF16:
      put(FloatToBf16Bits(static_cast<float>(value)));
      break;
    case DType::kF64:
      put(value);
      break;
    case DType::kI8:
      put(static_cast<std::int8_t>(value));
      break;
    case DType::kU8:
      put(static_cast<std::uint8_t>(value));
      break;
    case DType::kI32:
      put(static_cast<std::int32_t>(value));
      break;
    case DType::kI64:
      put(static_cast<std::int64_t>(value));
      break;
    case DType::kBool:
      put(static_cast<std::uint8_t>(value != 0));
      break;
  }
}

inline double DecodeElement(DType dtype, const unsigned char* in) {
  auto get = [&](auto v) {
    std::memcpy(&v, in, sizeof(v));
    return v;
  };
  switch (dtype) {
    case DType::kF32:
      return get(float{});
    case DType::kF16:
      return HalfBitsToFloat(get(std::uint16_t{}));
    case DType::kBF16:
      return Bf16BitsToFloat(get(std::uint16_t{}));
    case DType::kF64:
      return get(double{});
    case DType::kI8:
      return get(std::int8_t{});
    case DType::kU8:
      return get(std::uint8_t{});
    case DType::kI32:
      return get(std::int32_t{});
    case DType::kI64:
      return static_cast<double>(get(std::int64_t{}));
    case DType::kBool:
      return get(std::uint8_t{});
  }
  return 0;
}

// `value` rounded to `dtype` and back.
inline double RoundTo(DType dtype, double value) {
  unsigned char bytes[8];
  EncodeElement(dtype, value, bytes);
  return DecodeElement(dtype, bytes);
}

inline std::vector<long long> ShapeOf(const OperatorTest::Tensor& tensor) {
  if (tensor.shape.empty()) return {static_cast<long long>(tensor.values.size())};
  return std::vector<long long>(tensor.shape.begin(), tensor.shape.end());
}

// Host storage plus a strided view of it.
class HostTensor {
 public:
  static HostTensor Dense(DType dtype, std::vector<long long> sizes,
                          const std::vector<double>& values) {
    HostTensor t(dtype, std::move(sizes));
    for (std::size_t i = 0; i < values.size() && i < static_cast<std::size_t>(t.numel()); ++i) {
      EncodeElement(dtype, values[i], t.storage.data() + i * DTypeSize(dtype));
    }
    return t;
  }
  // Filled with NaN (floating types) or 0x5a bytes, so stale values show.
  static HostTensor Poisoned(DType dtype, std::vector<long long> sizes) {
    HostTensor t(dtype, std::move(sizes));
    for (long long i = 0; i < t.numel(); ++i) {
      unsigned char* at = t.storage.data() + i * DTypeSize(dtype);
      if (IsFloatingPoint(dtype)) {
        EncodeElement(dtype, NAN, at);
      } else {
        std::memset(at, 0x5a, DTypeSize(dtype));
      }
    }
    return t;
  }
  // The same storage viewed with the dimensions reversed.
  HostTensor Transposed() const {
    HostTensor t = *this;
    t.sizes.assign(sizes.rbegin(), sizes.rend());
    t.strides.assign(strides.rbegin(), strides.rend());
    return t;
  }
  long long numel() const {
    long long n = 1;
    for (long long s : sizes) n *= s;
    return n;
  }
  // The view's elements in row-major order.
  std::vector<double> Values() const {
    std::vector<double> out;
    for (long long i = 0; i < numel(); ++i) {
      long long rest = i;
      long long offset = 0;
      for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
        offset += (rest % sizes[d]) * strides[d];
        rest /= sizes[d];
      }
      out.push_back(DecodeElement(dtype, storage.data() + offset * DTypeSize(dtype)));
    }
    return out;
  }

  DType dtype;
  std::vector<long long> sizes;
  std::vector<long long> strides;
  std::vector<unsigned char> storage;

 private:
  HostTensor(DType d, std::vector<long long> s) : dtype(d), sizes(std::move(s)) {
    strides.resize(sizes.size());
    long long stride = 1;
    for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= sizes[i];
    }
    storage.resize(static_cast<std::size_t>(stride) * DTypeSize(d));
  }
};

inline device::TaskDesc MakeTask(std::uint32_t opcode, const std::vector<int>& tensors,
                                 long long begin, long long end,
                                 const std::vector<std::uint64_t>& slots) {
  device::TaskDesc task = {};
  task.opcode = opcode;
  task.num_tensors = static_cast<unsigned short>(tensors.size());
  for (std::size_t k = 0; k < tensors.size(); ++k) task.tensors[k] = tensors[k];
  task.begin = begin;
  task.end = end;
  for (std::size_t k = 0; k < slots.size(); ++k) task.scalars[k].bits = slots[k];
  task.dependency_counter = device::kNoDependencyCounter;
  return task;
}

inline device::TaskDesc MakeTask(std::uint32_t opcode, std::initializer_list<int> tensors,
                                 long long begin, long long end,
                                 const std::vector<std::uint64_t>& slots) {
  return MakeTask(opcode, std::vector<int>(tensors), begin, end, slots);
}

// Device 0, its primary context and one loaded image.
class GpuSession {
 public:
  GpuSession();
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  bool available() const { return driver_ != nullptr; }
  const std::string& skip_reason() const { return skip_reason_; }

  // Builds the image of `ops` for the device and loads it; failures are
  // reported by ready()/error().
  void LoadImageOf(const std::vector<OperatorSpec>& ops, LinkMode mode = LinkMode::kSeparate);
  bool ready() const { return function_ != nullptr; }
  const std::string& error() const { return error_; }
  const KernelImage& image() const { return image_; }

  // Copies the tensors to the device, runs the worker on `tasks` with
  // `blocks` blocks, copies every tensor back. The returned status is the
  // worker's.
  Expected<device::WorkerStatus> Run(const std::vector<device::TaskDesc>& tasks,
                                     const std::vector<HostTensor*>& tensors, unsigned blocks);

 private:
  const CudaDriverApi* driver_ = nullptr;
  std::string skip_reason_;
  std::string error_;
  std::string arch_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  KernelImage image_;
};

}  // namespace gpuos::registry::testing
