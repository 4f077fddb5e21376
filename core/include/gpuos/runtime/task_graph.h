// A task graph: the unit the runtime submits (docs/runtime.md). Tasks name an
// operator (resolved to a slot of the runtime's kernel image when added),
// the tensors it reads and writes (gpuos::Tensor views, or raw device
// descriptors whose memory the caller keeps alive: inputs, then outputs, as
// the operator declares them), attribute values, and the
// tasks it depends on. A graph may be submitted any number of times.
//
// Not thread safe; a graph refers to the Runtime that made it, which must
// outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpuos/device/abi.h"
#include "gpuos/dtype.h"
#include "gpuos/status.h"
#include "gpuos/storage.h"
#include "gpuos/tensor.h"

namespace gpuos::runtime {

class Runtime;

using TaskId = std::uint32_t;  // index of a task in its graph, in the order added

struct TaskOptions {
  // Work items of the task (output elements for elementwise operators,
  // output elements = reduced slices for reductions). 0: the element count
  // of the first output.
  long long work_items = 0;
  // Tiles the work is split into across blocks. 0: chosen from the work:
  // elementwise, kWorkItemsPerTile items per tile, at most
  // kElementwiseTilesPerBlock per worker block; reductions and custom
  // operators, one tile per kElementsPerOperatorTile elements of all the
  // task's tensors together, at most kOperatorTilesPerBlock per worker block
  // and at most one per work item. Always at most kMaxTiles.
  std::uint32_t tiles = 0;
  // The second type variable U of operators that have one (cast: dtype is
  // the input's, out_dtype the output's).
  std::optional<DType> out_dtype;
  // How urgent the task is; larger is more urgent (plugins::ReadyTask::
  // priority). Only a scheduler plugin other than the default "fifo"
  // (RuntimeConfig::plugins) reads it, and only for root tasks (those
  // without dependencies): it decides the order in which a submission's
  // roots start (docs/runtime.md, "Plugins"). Ignored otherwise.
  std::int32_t priority = 0;
};

inline constexpr long long kWorkItemsPerTile = 8192;
// At most this many elementwise tiles per worker block (default tiling).
inline constexpr long long kElementwiseTilesPerBlock = 4;
// Reductions and custom operators (default tiling): small and medium ones
// spread over the worker blocks (a 1 x 256 x 256 matmul reads 64 Ki
// elements: 9 tiles), tiny ones stay one tile (a 256-element layer_norm),
// which runs without claims; each tile costs a few microseconds of fixed
// dispatch work, so large ones stop at a few tiles per block.
inline constexpr long long kElementsPerOperatorTile = 8192;
inline constexpr long long kOperatorTilesPerBlock = 4;
inline constexpr std::uint32_t kMaxTiles = 65535;

// Attribute values as canonical text (name -> "1.5", "true"), as in packs.
using Attributes = std::vector<std::pair<std::string, std::string>>;

class TaskGraph {
 public:
  explicit TaskGraph(const Runtime& runtime) : runtime_(&runtime) {}

  // Adds a task running the newest version of operator `op` in the image,
  // instantiated for `dtype`. Errors (InvalidArgument, naming the operator):
  // unknown operator or dtype, a tensor count that differs from the
  // operator's signature, bad attributes, a dependency that is not an
  // earlier task of this graph.
  Expected<TaskId> Add(const std::string& op, DType dtype,
                       const std::vector<device::TensorDesc>& tensors,
                       const Attributes& attributes = {}, const std::vector<TaskId>& deps = {},
                       const TaskOptions& options = {});

  // The same with tensors (views of any layout): each is converted with
  // Tensor::ToDesc, and the graph keeps a reference to every storage it
  // uses, which Submit passes on to the submission until it is done (so the
  // tensors may be dropped right after Submit). Errors as above, and
  // InvalidArgument naming the task and the tensor for an undefined tensor or
  // one on another device than the runtime's.
  Expected<TaskId> Add(const std::string& op, DType dtype, const std::vector<Tensor>& tensors,
                       const Attributes& attributes = {}, const std::vector<TaskId>& deps = {},
                       const TaskOptions& options = {});

  // A task of an operator that takes exactly one tensor and reads a whole
  // table of descriptors from it (a stitched program: registry/
  // stitched_program.h): tensor 0 of the task is table[0], and table[1],
  // table[2], ... follow it in tensors(), in order and not shared with other
  // tasks, so that device code reaches them as OpCall::table[k]. Only the
  // descriptors' addresses need to be meaningful. Errors as Add (an
  // operator that takes other than one tensor), and InvalidArgument for an
  // empty table or one whose descriptors are malformed (rank or dtype out
  // of range).
  Expected<TaskId> AddTableTask(const std::string& op, DType dtype,
                                const std::vector<device::TensorDesc>& table,
                                const Attributes& attributes = {},
                                const std::vector<TaskId>& deps = {},
                                const TaskOptions& options = {});

  // Addresses an address table (AddAddressTableTask) packs into one
  // descriptor-sized record of tensors().
  static constexpr std::size_t kAddressesPerRecord =
      sizeof(device::TensorDesc) / sizeof(std::uint64_t);

  // A task of an operator that takes exactly one tensor, `first`, and reads
  // a table of device addresses right after it (a stitched program:
  // registry/stitched_program.h): tensors() holds `first`, then `addresses`
  // packed kAddressesPerRecord to a descriptor-sized record, in order and
  // not shared with other tasks, so that device code reads address k as
  // reinterpret_cast<const unsigned long long*>(OpCall::table + 1)[k].
  // Where AddTableTask costs a 160-byte descriptor per entry, this costs 8
  // bytes per address, so the graph travels in its 8 KiB ring slot (one
  // PCIe round trip) alone with up to 960 addresses instead of 48 (the
  // worker's admission did not get faster with the fewer bytes it copies:
  // docs/stitching.md, "The table"). The records are not descriptors: only the
  // task's operator may read them (a scheduler plugin sees them in
  // RootScheduleInput::tensors as they are). Errors as AddTableTask for
  // `first`.
  Expected<TaskId> AddAddressTableTask(const std::string& op, DType dtype,
                                       const device::TensorDesc& first,
                                       const std::vector<std::uint64_t>& addresses,
                                       const Attributes& attributes = {},
                                       const std::vector<TaskId>& deps = {},
                                       const TaskOptions& options = {});

  // A task that does nothing (slot 0): a join point, or a measure of
  // dispatch cost. Errors as Add for `deps`.
  Expected<TaskId> AddNoop(const std::vector<TaskId>& deps = {});

  // Points descriptor `tensor_index` (an index into tensors()) at another
  // device address, keeping its dtype, sizes and strides: how a graph built
  // once is replayed on new buffers of the same layout. Submit copies the
  // descriptors, so this may run again as soon as Submit returned. The caller
  // keeps the memory alive until the submissions using it are done. Errors:
  // InvalidArgument for an index past tensors().
  Status SetTensorAddress(std::size_t tensor_index, std::uint64_t address);

  // Sets the 8-byte word `word` (0 to kAddressesPerRecord - 1) of entry
  // `tensor_index` of tensors(): word 0 of a descriptor is its address (as
  // SetTensorAddress); address k of an address table whose first
  // descriptor is entry t is word k % kAddressesPerRecord of entry t + 1 +
  // k / kAddressesPerRecord (AddAddressTableTask). The same contract as
  // SetTensorAddress. Errors: InvalidArgument for an index past tensors()
  // or a word past the entry.
  Status SetAddressWord(std::size_t tensor_index, std::size_t word, std::uint64_t address);

  std::size_t size() const { return tasks_.size(); }
  bool empty() const { return tasks_.empty(); }

  // For Runtime::Submit. tasks()[i].tensors index tensors(); successors of
  // task i are successors()[tasks()[i].successor_begin ...
  // + successor_count], filled by Finish(); dependency_counter holds the
  // number of predecessors.
  const std::vector<device::TaskDesc>& tasks() const { return tasks_; }
  const std::vector<device::TensorDesc>& tensors() const { return tensors_; }
  const std::vector<std::uint32_t>& successors() const;
  // Logical operator id of each task (0 for no-ops), for statistics.
  const std::vector<std::uint32_t>& logical_ops() const { return logical_ops_; }
  // The storages of the tensors added as Tensors, each once.
  const std::vector<std::shared_ptr<Storage>>& storages() const { return storages_; }
  // TaskOptions::priority of each task (0 for no-ops).
  const std::vector<std::int32_t>& priorities() const { return priorities_; }

 private:
  Expected<TaskId> Append(device::TaskDesc task, std::uint32_t logical, std::int32_t priority,
                          const std::vector<TaskId>& deps);
  std::uint32_t InternTensor(const device::TensorDesc& desc);
  // Stores 8-byte word `word` of tensors_[tensor_index] (SetAddressWord,
  // AddAddressTableTask). REQUIRES: both in range.
  void WriteWord(std::size_t tensor_index, std::size_t word, std::uint64_t value);

  const Runtime* runtime_;
  mutable std::vector<device::TaskDesc> tasks_;  // successor fields set by successors()
  std::vector<device::TensorDesc> tensors_;
  // tensors_ below this index belong to tables (AddTableTask,
  // AddAddressTableTask): InternTensor does not share them, so that a table
  // rebound later (SetAddressWord) never changes another task's descriptor.
  std::size_t intern_floor_ = 0;
  std::vector<std::uint32_t> logical_ops_;
  std::vector<std::int32_t> priorities_;
  std::vector<std::shared_ptr<Storage>> storages_;
  std::unordered_set<const Storage*> kept_alive_;  // storages_, for finding one fast
  std::vector<std::vector<TaskId>> successor_lists_;
  mutable std::vector<std::uint32_t> successors_;  // flattened on demand
  mutable bool flattened_ = false;
};

}  // namespace gpuos::runtime
