// Per-submission errors (docs/runtime.md, "Errors"): the device keeps the
// first error of each submission in a record of its ring slot and mirrors
// it into mapped memory at the submission's completion; here the host turns
// it into the Status of that submission's Future.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

template <typename T>
T LoadAcquire(const T* p) {
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
}

const char* WorkerErrorName(unsigned int error) {
  switch (error) {
    case device::kWorkerBadOpcode:
      return "bad opcode (no operator in that slot)";
    case device::kWorkerBadTensorIndex:
      return "tensor index outside the submission";
    case device::kWorkerBadArity:
      return "wrong number of tensors for the operator";
    case device::kWorkerBadDType:
      return "tensor dtype differs from the operator instantiation";
    case device::kWorkerBadShape:
      return "shapes do not broadcast or reduce as required";
    case device::kWorkerScratchTooSmall:
      return "accumulator larger than the scratch memory";
    case device::kWorkerOperatorFailed:
      return "operator code called ctx.fail()";
    default:
      return "unknown worker error";
  }
}

std::string WorkerErrorDetail(unsigned int error, unsigned int detail) {
  const std::string n = std::to_string(detail);
  switch (error) {
    case device::kWorkerBadOpcode:
      return "slot " + n;
    case device::kWorkerBadTensorIndex:
    case device::kWorkerBadDType:
      return "tensor " + n + ", counting inputs then outputs from 0";
    case device::kWorkerBadArity:
      return n + " tensors given";
    case device::kWorkerOperatorFailed:
      if (detail == device::kStitchWaitTimedOut) {
        char limit[32];
        std::snprintf(limit, sizeof(limit), "%g", device::kStitchWaitLimitNs / 1e9);
        return "code " + n + ": a stitched program's stage waited " + limit +
               " s for the stages it reads (a producer that never finished, or runs of one "
               "program that overlapped)";
      }
      return "code " + n;
    default:
      return "detail " + n;
  }
}

// The record of `sequence` in its slot, when the device wrote one for it.
std::optional<device::WorkerStatus> RecordOf(const device::SubmissionError* records,
                                             std::uint32_t capacity, std::uint64_t sequence) {
  if (records == nullptr) return std::nullopt;
  const device::SubmissionError& record = records[(sequence - 1) % capacity];
  if (LoadAcquire(&record.sequence) != sequence) return std::nullopt;
  device::WorkerStatus status = {};
  status.error = LoadAcquire(&record.status.error);
  status.task_id = LoadAcquire(&record.status.task_id);
  status.detail = LoadAcquire(&record.status.detail);
  if (status.error == device::kWorkerOk) return std::nullopt;
  return status;
}

}  // namespace

std::string DescribeWorkerError(unsigned int error, unsigned int detail) {
  return std::string(WorkerErrorName(error)) + " (" + WorkerErrorDetail(error, detail) + ")";
}

void SubmissionHistory::Add(const SubmissionSpan& span) {
  std::lock_guard<std::mutex> lock(mutex_);
  ring_[(span.sequence - 1) % ring_.size()] = span;
  newest_ = std::max(newest_, span.sequence);
}

std::optional<SubmissionSpan> SubmissionHistory::Find(std::uint64_t sequence) const {
  if (sequence == 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  const SubmissionSpan& span = ring_[(sequence - 1) % ring_.size()];
  if (span.sequence != sequence) return std::nullopt;
  return span;
}

std::optional<SubmissionSpan> SubmissionHistory::FindTask(std::uint32_t task_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<SubmissionSpan> found;
  for (const SubmissionSpan& span : ring_) {
    if (span.sequence == 0 || task_id - span.first_task_id >= span.task_count) continue;
    if (!found || span.sequence > found->sequence) found = span;  // ids wrap after 2^32
  }
  return found;
}

std::uint64_t SubmissionHistory::newest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return newest_;
}

void FailureLog::Add(std::uint64_t sequence, Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_[sequence] = std::move(status);
  while (failures_.size() > kMaxKept) failures_.erase(failures_.begin());
}

std::optional<Status> FailureLog::Find(std::uint64_t sequence) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return FindLocked(sequence);
}

std::optional<Status> FailureLog::FindLocked(std::uint64_t sequence) const {
  auto it = failures_.find(sequence);
  if (it == failures_.end()) return std::nullopt;
  return it->second;
}

void SlotNames::Note(std::uint64_t generation, const registry::KernelImage& image) {
  std::lock_guard<std::mutex> lock(mutex_);
  newest_generation_ = std::max(newest_generation_, generation);
  if (!epochs_.empty() && epochs_.back()->image_key == image.key) return;
  auto epoch = std::make_shared<Epoch>();
  epoch->first_generation = generation;
  epoch->image_key = image.key;
  for (const registry::ImageEntry& entry : image.entries) {
    if (entry.slot >= epoch->by_slot.size()) epoch->by_slot.resize(entry.slot + 1);
    Name name;
    name.name = entry.op_name + " " + DTypeName(entry.dtype);
    if (entry.out_dtype) name.name += std::string("->") + DTypeName(*entry.out_dtype);
    name.version = entry.version.ToString();
    epoch->by_slot[entry.slot] = std::move(name);
  }
  epochs_.push_back(std::move(epoch));
  if (epochs_.size() > kMaxEpochs) epochs_.erase(epochs_.begin());
}

std::optional<SlotNames::Name> SlotNames::Find(std::uint64_t generation, std::uint32_t slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = epochs_.rbegin(); it != epochs_.rend(); ++it) {
    if ((*it)->first_generation > generation) continue;
    if (slot < (*it)->by_slot.size()) return (*it)->by_slot[slot];
    return std::nullopt;
  }
  return std::nullopt;
}

std::uint64_t SlotNames::newest_generation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return newest_generation_;
}

std::chrono::nanoseconds WatchdogInterval(std::chrono::nanoseconds limit) {
  return std::clamp<std::chrono::nanoseconds>(limit / 8, std::chrono::milliseconds(1),
                                              std::chrono::milliseconds(250));
}

std::string FormatDuration(std::chrono::nanoseconds duration) {
  const double ns = static_cast<double>(duration.count());
  char text[32];
  if (ns >= 1e9) {
    std::snprintf(text, sizeof(text), "%.2f s", ns / 1e9);
  } else if (ns >= 1e6) {
    std::snprintf(text, sizeof(text), "%.0f ms", ns / 1e6);
  } else {
    std::snprintf(text, sizeof(text), "%.0f us", ns / 1e3);
  }
  return text;
}

std::pair<std::string, std::string> RuntimeImpl::OperatorNames(std::uint32_t op,
                                                               std::uint64_t generation) const {
  if (op == 0) return {"noop", ""};
  if ((op & device::kTraceSlotBit) != 0) {
    // Submit stamps each task's slot from the live table (logical_op 0).
    const std::uint32_t slot = op & ~device::kTraceSlotBit;
    const std::uint64_t grid =
        generation != 0 ? generation : diagnostics_.slot_names.newest_generation();
    if (auto name = diagnostics_.slot_names.Find(grid, slot)) return {name->name, name->version};
    return {"slot " + std::to_string(slot), ""};
  }
  std::lock_guard<std::mutex> lock(table_mutex_);
  const OperatorRef* ref = table_.ByLogical(op);
  if (ref == nullptr) return {"logical operator " + std::to_string(op), ""};
  std::string name = ref->name + " " + DTypeName(ref->dtype);
  if (ref->out_dtype) name += std::string("->") + DTypeName(*ref->out_dtype);
  return {name, ref->version.ToString()};
}

std::string RuntimeImpl::NameTask(std::uint32_t task_id) const {
  const auto span = diagnostics_.history.FindTask(task_id);
  if (!span) return "task id " + std::to_string(task_id);
  return "task " + std::to_string(task_id - span->first_task_id) + " of submission " +
         std::to_string(span->sequence) + " (task id " + std::to_string(task_id) + ")";
}

Status RuntimeImpl::DescribeFailure(std::uint64_t sequence,
                                    const device::WorkerStatus& status) const {
  std::string task = "task id " + std::to_string(status.task_id);
  std::string op = "operator unknown";
  const auto span = diagnostics_.history.Find(sequence);
  if (span && status.task_id - span->first_task_id < span->task_count) {
    const std::uint32_t index = status.task_id - span->first_task_id;
    task = "task " + std::to_string(index) + " (task id " + std::to_string(status.task_id) + ")";
    // The submission has not been reclaimed: its staged descriptors are intact.
    const device::SubmissionSlot& ring_slot =
        submission_slots_[(sequence - 1) % params_.submission_capacity];
    const device::Submission& record = ring_slot.record;
    if (record.sequence == sequence && index < record.task_count) {
      // A scheduler plugin may have staged a root elsewhere (runtime_plugins.h).
      const device::TaskDesc* staged =
          record.inline_words != 0 ? reinterpret_cast<const device::TaskDesc*>(ring_slot.payload)
                                   : staged_tasks_ + record.task_begin;
      std::uint32_t at = index;
      if (staged[at].task_id != status.task_id) {
        at = 0;
        while (at + 1 < record.task_count && staged[at].task_id != status.task_id) ++at;
      }
      const device::TaskDesc& desc = staged[at];
      if (desc.task_id == status.task_id) {
        const auto [name, version] =
            OperatorNames(device::TraceOperator(desc.logical_op, desc.opcode));
        op = name + (version.empty() ? "" : " version " + version);
      }
    }
  }
  const std::string message = "submission " + std::to_string(sequence) + ": " + task + ", " + op +
                              ", failed on the GPU: " + WorkerErrorName(status.error) + " (" +
                              WorkerErrorDetail(status.error, status.detail) + ")";
  return status.error == device::kWorkerOperatorFailed ? FailedPrecondition(message)
                                                       : InvalidArgument(message);
}

Status RuntimeImpl::SubmissionResult(std::uint64_t sequence) const {
  // Under the log's mutex: the slot's record cannot be overwritten while it
  // is read, because KeepFailure moves a failure into the log (under the
  // same mutex) before the slot can be reused.
  std::lock_guard<std::mutex> lock(diagnostics_.failures.mutex());
  if (auto kept = diagnostics_.failures.FindLocked(sequence)) return *kept;
  const auto status = RecordOf(diagnostics_.slot_errors, params_.submission_capacity, sequence);
  if (!status) return Status::Ok();
  return DescribeFailure(sequence, *status);
}

void RuntimeImpl::KeepFailure(std::uint64_t sequence) {
  const auto status = RecordOf(diagnostics_.slot_errors, params_.submission_capacity, sequence);
  if (status) diagnostics_.failures.Add(sequence, DescribeFailure(sequence, *status));
}

}  // namespace gpuos::runtime
