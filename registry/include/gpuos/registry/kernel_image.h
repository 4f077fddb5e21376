// A kernel image: one cubin holding the worker and every active operator
// instantiation, linked by nvJitLink for one GPU architecture, plus the
// manifest that says which operator sits in which slot of the image's
// operator table (docs/jit.md).
//
// Values; copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuos/dtype.h"
#include "gpuos/registry/operator_spec.h"

namespace gpuos::registry {

// Symbols every image exports (device/src/worker.cu).
inline constexpr const char* kWorkerKernelSymbol = "gpuos_worker";             // one-shot
inline constexpr const char* kQueueWorkerKernelSymbol = "gpuos_queue_worker";  // persistent
// The tile launcher for tables of `size` descriptors (a size of
// device::kLaunchTableSizes): "gpuos_tiles_worker_<size>".
inline std::string TilesWorkerKernelSymbol(unsigned int size) {
  return "gpuos_tiles_worker_" + std::to_string(size);
}
// unsigned int[device::kMaxLogicalOps]: logical operator id -> slot.
inline constexpr const char* kAliasTableSymbol = "gpuos_alias_table";
inline constexpr const char* kOpTableSymbol = "gpuos_op_table";
inline constexpr const char* kOpTableSizeSymbol = "gpuos_op_table_size";
inline constexpr const char* kImageAbiVersionSymbol = "gpuos_image_abi_version";

// One slot of the operator table: operator `op_name` at `version`,
// instantiated for `dtype`. A TaskDesc with opcode == slot runs it. Slot 0 is
// the no-op and never appears here. The same operator may appear at two
// versions (current and previous: dual-slot aliasing), each with its own
// slots.
struct ImageEntry {
  std::string op_name;
  SemVer version;
  OperatorKind kind = OperatorKind::kElementwise;
  DType dtype = DType::kF32;
  // The dtype of the second type variable U for operators with out_dtypes
  // (e.g. cast f32 -> i64 has dtype f32, out_dtype i64); nullopt otherwise.
  std::optional<DType> out_dtype;
  std::uint32_t slot = 0;
  std::string symbol;  // the __device__ function, e.g. gpuos_op_3add_v1_0_0_f32

  bool operator==(const ImageEntry&) const = default;
};

struct KernelImage {
  std::string arch;                 // "sm_90"
  std::string cubin;                // for cuModuleLoadData
  std::vector<ImageEntry> entries;  // by slot (1, 2, ...)
  std::uint32_t table_size = 1;     // slots including the no-op slot 0
  std::uint32_t abi_version = 0;    // GPUOS_RUNTIME_ABI_VERSION
  std::string key;                  // build-cache key of the cubin

  // The entry for (op_name, version, dtype, out_dtype), or nullptr. Operators
  // with out_dtypes are found only with their out_dtype.
  const ImageEntry* Find(const std::string& op_name, const SemVer& version, DType dtype,
                         std::optional<DType> out_dtype = std::nullopt) const;
  // The entry with the highest version of `op_name` for `dtype` (and
  // `out_dtype`), or nullptr.
  const ImageEntry* FindLatest(const std::string& op_name, DType dtype,
                               std::optional<DType> out_dtype = std::nullopt) const;
};

}  // namespace gpuos::registry
