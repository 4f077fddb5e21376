// Ordering against other CUDA streams (docs/runtime.md, "Streams"), both
// directions, with stream memory operations so that neither the host nor the
// worker blocks:
// - a submission waits for a stream: the stream writes the submission's
//   sequence into the gate word of its ring slot (cuStreamWriteValue64) and
//   the worker admits the submission once it reads the word open
//   (queue_worker.cu, Admit); or the caller opens it (SubmitOptions::
//   open_later, OpenGate: a word of the ring slot itself, which the worker
//   reads with the record, so the caller's own ordering, e.g. a stream query,
//   overlaps the worker's pick-up);
// - a stream waits for a submission: cuStreamWaitValue64 on the slot's
//   completion word, which only grows (slot s holds s + 1, s + 1 + capacity,
//   ...), so waiting for ">= sequence" is right even after the slot is reused.
#include <string>
#include <vector>

#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

// Queried once per runtime; cached in `cached` (-1 = not yet).
Status RequireStreamMemoryOperations(const CudaDriverApi& driver, CUdevice device,
                                     const std::string& device_name, std::atomic<int>& cached) {
  int supported = cached.load(std::memory_order_relaxed);
  if (supported < 0) {
    int value = 0;
    GPUOS_RETURN_IF_ERROR(
        CudaStatus(driver,
                   driver.cuDeviceGetAttribute(
                       &value, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device),
                   "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)"));
    supported = value != 0 ? 1 : 0;
    cached.store(supported, std::memory_order_relaxed);
  }
  if (supported == 0) {
    return FailedPrecondition(
        device_name +
        " does not support 64-bit stream memory operations "
        "(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0), which gpuos orders other CUDA "
        "streams with; order on the host instead (cuStreamSynchronize before Submit, "
        "Future::Wait before launching)");
  }
  return Status::Ok();
}

}  // namespace

Status RuntimeImpl::CheckWaitFor(const SubmitOptions& options) {
  if (options.wait_for != nullptr && options.open_later) {
    return InvalidArgument(
        "SubmitOptions: wait_for and open_later both set; a submission has one gate: either "
        "the stream opens it (wait_for) or Runtime::OpenGate does (open_later)");
  }
  if (options.wait_for == nullptr) return Status::Ok();
  if (options.wait_for == CU_STREAM_LEGACY) {
    return InvalidArgument(
        "SubmitOptions::wait_for is the legacy default stream (CU_STREAM_LEGACY), whose work "
        "waits for the running worker while the worker would wait for it; enqueue the work on a "
        "stream created with CU_STREAM_NON_BLOCKING (cudaStreamNonBlocking) and wait for that");
  }
  GPUOS_RETURN_IF_ERROR(
      RequireStreamMemoryOperations(*driver_, device_, device_name_, stream_memops_));
  if (gate_words_ != 0) return Status::Ok();
  const std::size_t bytes = std::size_t{params_.submission_capacity} * sizeof(std::uint64_t);
  CUdeviceptr words = 0;
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuMemAlloc(&words, bytes),
                             "cuMemAlloc(gate words, " + std::to_string(bytes) + " bytes)"));
  std::vector<std::uint64_t> zeros(params_.submission_capacity, 0);
  const Status zeroed = Copy(true, words, zeros.data(), bytes);
  if (!zeroed.ok()) {
    deferred_frees_.push_back(words);  // freed at the next park, not while the worker runs
    return zeroed;
  }
  // Freed by Shutdown with the other allocations (never while the worker runs).
  allocations_.push_back(words);
  gate_words_ = words;
  return Status::Ok();
}

Expected<RuntimeImpl::Gate> RuntimeImpl::EnqueueGate(const SubmitOptions& options,
                                                     std::uint64_t sequence, std::uint32_t slot) {
  if (options.open_later) {
    // The slot's gate word holds an earlier submission's sequence (or 0):
    // closed until OpenGate stores this one.
    Gate gate;
    gate.address = device::kSlotGate;
    gate.value = sequence;
    return gate;
  }
  if (options.wait_for == nullptr) return Gate{};
  // The slot's previous submission has finished (the caller holds the slot),
  // so its gate was opened with a smaller sequence: the word is closed for
  // this one until the stream writes it.
  Gate gate;
  gate.address = gate_words_ + std::uint64_t{slot} * sizeof(std::uint64_t);
  gate.value = sequence;
  // CU_STREAM_WRITE_VALUE_DEFAULT fences the stream's earlier work before the
  // write, so what it wrote is visible once the worker reads the gate open.
  GPUOS_RETURN_IF_ERROR(Cuda(driver_->cuStreamWriteValue64(options.wait_for, gate.address, sequence,
                                                           CU_STREAM_WRITE_VALUE_DEFAULT),
                             "cuStreamWriteValue64 (the gate of submission " +
                                 std::to_string(sequence) + " on SubmitOptions::wait_for)"));
  return gate;
}

Status RuntimeImpl::StreamWaitFor(CUstream stream, const Future& future) {
  if (future.sequence_ == 0) return Status::Ok();
  if (future.runtime_ != this) {
    return InvalidArgument("StreamWaitFor: the future of submission " +
                           std::to_string(future.sequence_) +
                           " belongs to another runtime; pass it to the runtime that made it");
  }
  if (Done(future.sequence_)) return Status::Ok();
  if (shut_down_) {
    return Unavailable("the runtime was shut down before submission " +
                       std::to_string(future.sequence_) + " finished");
  }
  GPUOS_RETURN_IF_ERROR(MakeCurrent());
  GPUOS_RETURN_IF_ERROR(
      RequireStreamMemoryOperations(*driver_, device_, device_name_, stream_memops_));
  const std::uint32_t slot =
      static_cast<std::uint32_t>((future.sequence_ - 1) % params_.submission_capacity);
  const CUdeviceptr word = params_.done + std::uint64_t{slot} * sizeof(std::uint64_t);
  return Cuda(
      driver_->cuStreamWaitValue64(stream, word, future.sequence_, CU_STREAM_WAIT_VALUE_GEQ),
      "cuStreamWaitValue64 (the completion of submission " + std::to_string(future.sequence_) +
          ")");
}

Expected<Future> Runtime::Submit(const TaskGraph& graph, const SubmitOptions& options) {
  return impl_->Submit(graph, options);
}

Status Runtime::StreamWaitFor(CUstream_st* stream, const Future& future) {
  return impl_->StreamWaitFor(stream, future);
}

Status Runtime::OpenGate(const Future& future) { return impl_->OpenGate(future, false); }

Status Runtime::DropGated(const Future& future) { return impl_->OpenGate(future, true); }

}  // namespace gpuos::runtime
