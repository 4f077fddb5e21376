#include "gpuos/runtime/task_graph.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "gpuos/registry/codegen.h"
#include "gpuos/runtime/runtime.h"
#include "runtime_impl.h"
#include "task_layout.h"
#include "task_tiling.h"

namespace gpuos::runtime {

std::uint32_t TaskGraph::InternTensor(const device::TensorDesc& desc) {
  // Tasks of a graph mostly share a few tensors; storing each once keeps the
  // payload copied to the device small.
  for (std::size_t i = tensors_.size(); i-- > intern_floor_;) {
    if (std::memcmp(&tensors_[i], &desc, sizeof(desc)) == 0) return static_cast<std::uint32_t>(i);
    if (tensors_.size() - i > 32) break;
  }
  tensors_.push_back(desc);
  return static_cast<std::uint32_t>(tensors_.size() - 1);
}

Expected<TaskId> TaskGraph::Append(device::TaskDesc task, std::uint32_t logical,
                                   std::int32_t priority, const std::vector<TaskId>& deps) {
  const TaskId id = static_cast<TaskId>(tasks_.size());
  for (TaskId dep : deps) {
    if (dep >= id) {
      return InvalidArgument("task " + std::to_string(id) + " depends on task " +
                             std::to_string(dep) +
                             ", which is not an earlier task of the graph (add tasks after "
                             "the tasks they depend on)");
    }
  }
  std::vector<TaskId> unique = deps;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  task.dependency_counter = static_cast<unsigned int>(unique.size());
  for (TaskId dep : unique) successor_lists_[dep].push_back(id);
  tasks_.push_back(task);
  logical_ops_.push_back(logical);
  priorities_.push_back(priority);
  successor_lists_.emplace_back();
  flattened_ = false;
  return id;
}

Expected<TaskId> TaskGraph::Add(const std::string& op, DType dtype,
                                const std::vector<device::TensorDesc>& tensors,
                                const Attributes& attributes, const std::vector<TaskId>& deps,
                                const TaskOptions& options) {
  GPUOS_ASSIGN_OR_RETURN(const OperatorRef ref, runtime_->Resolve(op, dtype, options.out_dtype));
  const std::string what =
      "task " + std::to_string(tasks_.size()) + " (" + op + " " + DTypeName(dtype) + ")";
  if (ref.spec == nullptr) return Internal(what + ": the image entry has no spec");
  const registry::OperatorSpec& spec = *ref.spec;
  const std::size_t arity = spec.inputs.size() + spec.outputs.size();
  if (tensors.size() != arity) {
    return InvalidArgument(what + ": got " + std::to_string(tensors.size()) +
                           " tensors; the operator takes " + std::to_string(spec.inputs.size()) +
                           " inputs and " + std::to_string(spec.outputs.size()) + " outputs");
  }
  auto slots = registry::EncodeAttributeSlots(spec, attributes);
  if (!slots.ok()) return slots.status().WithContext(what);
  device::TaskDesc task = {};
  task.opcode = ref.slot;
  task.logical_op = ref.logical;
  task.num_tensors = static_cast<unsigned short>(tensors.size());
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    task.tensors[k] = static_cast<int>(InternTensor(tensors[k]));
  }
  for (std::size_t k = 0; k < slots->size(); ++k) task.scalars[k].bits = (*slots)[k];
  long long items = options.work_items;
  if (items <= 0) {
    const std::size_t first_output = spec.inputs.size() < tensors.size() ? spec.inputs.size() : 0;
    items = tensors.empty() ? 1 : tensors[first_output].numel;
  }
  task.begin = 0;
  task.end = items;
  std::uint32_t tiles = options.tiles;
  if (tiles == 0) {
    // Tiles pay a fixed cost each (claim, fences, dispatch: about 4 us): a
    // few tiles per worker block balance the load without paying it
    // thousands of times (bench elementwise_large_f32; task_tiling.h).
    tiles = DefaultTileCount(spec.kind, items, TouchedElements(tensors), runtime_->worker_blocks());
  }
  task.num_tiles = std::min(tiles, kMaxTiles);
  if (spec.kind == registry::OperatorKind::kElementwise && spec.inputs.size() < tensors.size()) {
    task.flags = ElementwiseLayoutFlags(tensors, spec.inputs.size(), items);
  }
  return Append(task, ref.logical, options.priority, deps);
}

Expected<TaskId> TaskGraph::Add(const std::string& op, DType dtype,
                                const std::vector<Tensor>& tensors, const Attributes& attributes,
                                const std::vector<TaskId>& deps, const TaskOptions& options) {
  const int runtime_device = runtime_->impl_->DeviceOrdinal();
  std::vector<device::TensorDesc> descs;
  descs.reserve(tensors.size());
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& tensor = tensors[k];
    const std::string what = "task " + std::to_string(tasks_.size()) + " (" + op + " " +
                             DTypeName(dtype) + "), tensor " + std::to_string(k);
    if (!tensor.defined()) return InvalidArgument(what + " is undefined (a default Tensor)");
    if (tensor.storage()->device() != runtime_device) {
      return InvalidArgument(what + " lives on CUDA device " +
                             std::to_string(tensor.storage()->device()) +
                             ", and the runtime runs on device " + std::to_string(runtime_device));
    }
    Expected<device::TensorDesc> desc = tensor.ToDesc();
    if (!desc.ok()) return desc.status().WithContext(what);
    descs.push_back(*desc);
  }
  GPUOS_ASSIGN_OR_RETURN(const TaskId id, Add(op, dtype, descs, attributes, deps, options));
  for (const Tensor& tensor : tensors) {
    if (kept_alive_.insert(tensor.storage().get()).second) storages_.push_back(tensor.storage());
  }
  return id;
}

Expected<TaskId> TaskGraph::AddTableTask(const std::string& op, DType dtype,
                                         const std::vector<device::TensorDesc>& table,
                                         const Attributes& attributes,
                                         const std::vector<TaskId>& deps,
                                         const TaskOptions& options) {
  const std::string what = "task " + std::to_string(tasks_.size()) + " (" + op + "), table";
  if (table.empty()) return InvalidArgument(what + " is empty; give at least one descriptor");
  for (std::size_t k = 0; k < table.size(); ++k) {
    const device::TensorDesc& d = table[k];
    if (d.rank < 0 || d.rank > device::kMaxRank || d.dtype < 0 ||
        d.dtype > static_cast<int>(device::kDTypeBool)) {
      return InvalidArgument(what + " entry " + std::to_string(k) + ": rank or dtype out of range");
    }
  }
  const std::size_t before = tensors_.size();
  GPUOS_ASSIGN_OR_RETURN(const TaskId id, Add(op, dtype, {table[0]}, attributes, deps, options));
  device::TaskDesc& task = tasks_[id];
  if (tensors_.size() == before) {
    // table[0] matched an earlier task's descriptor: the table needs its own.
    tensors_.push_back(table[0]);
    task.tensors[0] = static_cast<int>(tensors_.size() - 1);
  }
  tensors_.insert(tensors_.end(), table.begin() + 1, table.end());
  intern_floor_ = tensors_.size();
  return id;
}

Expected<TaskId> TaskGraph::AddAddressTableTask(const std::string& op, DType dtype,
                                                const device::TensorDesc& first,
                                                const std::vector<std::uint64_t>& addresses,
                                                const Attributes& attributes,
                                                const std::vector<TaskId>& deps,
                                                const TaskOptions& options) {
  GPUOS_ASSIGN_OR_RETURN(const TaskId id,
                         AddTableTask(op, dtype, {first}, attributes, deps, options));
  // AddTableTask leaves the task's own copy of `first` last in tensors_.
  const std::size_t records = (addresses.size() + kAddressesPerRecord - 1) / kAddressesPerRecord;
  const std::size_t base = tensors_.size();
  tensors_.resize(base + records, device::TensorDesc{});
  for (std::size_t k = 0; k < addresses.size(); ++k) {
    WriteWord(base + k / kAddressesPerRecord, k % kAddressesPerRecord, addresses[k]);
  }
  intern_floor_ = tensors_.size();
  return id;
}

Status TaskGraph::SetTensorAddress(std::size_t tensor_index, std::uint64_t address) {
  return SetAddressWord(tensor_index, 0, address);
}

Status TaskGraph::SetAddressWord(std::size_t tensor_index, std::size_t word,
                                 std::uint64_t address) {
  static_assert(offsetof(device::TensorDesc, data) == 0, "word 0 is a descriptor's address");
  if (tensor_index >= tensors_.size()) {
    return InvalidArgument("tensor " + std::to_string(tensor_index) + " of a graph with " +
                           std::to_string(tensors_.size()) + " tensor descriptors");
  }
  if (word >= kAddressesPerRecord) {
    return InvalidArgument("word " + std::to_string(word) + " of a " +
                           std::to_string(sizeof(device::TensorDesc)) + "-byte descriptor (" +
                           std::to_string(kAddressesPerRecord) + " words)");
  }
  WriteWord(tensor_index, word, address);
  return Status::Ok();
}

void TaskGraph::WriteWord(std::size_t tensor_index, std::size_t word, std::uint64_t value) {
  std::memcpy(
      reinterpret_cast<unsigned char*>(&tensors_[tensor_index]) + word * sizeof(std::uint64_t),
      &value, sizeof(std::uint64_t));
}

Expected<TaskId> TaskGraph::AddNoop(const std::vector<TaskId>& deps) {
  device::TaskDesc task = {};
  task.num_tiles = 1;
  return Append(task, 0, 0, deps);
}

const std::vector<std::uint32_t>& TaskGraph::successors() const {
  if (!flattened_) {
    successors_.clear();
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      device::TaskDesc& task = tasks_[i];
      task.successor_begin = static_cast<unsigned int>(successors_.size());
      task.successor_count = static_cast<unsigned int>(successor_lists_[i].size());
      successors_.insert(successors_.end(), successor_lists_[i].begin(), successor_lists_[i].end());
    }
    flattened_ = true;
  }
  return successors_;
}

}  // namespace gpuos::runtime
