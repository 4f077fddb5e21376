#include "bridge_runtime.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "bridge_host_timing.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/embedded_sets.h"
#include "gpuos/environment.h"
#include "gpuos/registry/pack_loader.h"

namespace gpuos::torch_bridge {

std::string DefaultCachePath() { return DefaultDataDirectory() + "/pytorch-build-cache.db"; }

Expected<std::unique_ptr<runtime::Runtime>> OpenRuntime(const OpenOptions& options) {
  runtime::RuntimeConfig config;
  config.device = options.device;
  config.trace_capacity = options.trace_capacity;
  if (const auto blocks = GetEnv("GPUOS_TORCH_BLOCKS")) {
    char* end = nullptr;
    const unsigned long value = std::strtoul(blocks->c_str(), &end, 10);
    if (*end != 0 || value == 0 || value > 4096) {
      return InvalidArgument(
          "GPUOS_TORCH_BLOCKS must be a worker block count from 1 to 4096 "
          "(unset: one per SM); got '" +
          *blocks + "'");
    }
    config.blocks = static_cast<unsigned int>(value);
  }
  if (!options.repository_path.empty()) {
    config.repository_path = options.repository_path;
    return runtime::Runtime::Open(config);
  }
  for (const auto& file : builtin_packs::EmbeddedFiles()) {
    GPUOS_ASSIGN_OR_RETURN(auto pack,
                           registry::ParsePack(file.contents, "builtin:" + std::string(file.name)));
    for (auto& spec : pack.operators) config.operators.push_back(std::move(spec));
  }
  config.repository_path = options.cache_path.empty() ? DefaultCachePath() : options.cache_path;
  std::error_code error;
  const auto directory = std::filesystem::path(config.repository_path).parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory, error);
  if (error) {
    return IoError("cannot create the build cache's directory " + directory.string() + ": " +
                   error.message() + " (set GPUOS_TORCH_CACHE to a writable path)");
  }
  return runtime::Runtime::Open(config);
}

Expected<std::unique_ptr<Program>> Program::Create(runtime::Runtime& runtime,
                                                   const ProgramSpec& spec) {
  std::unique_ptr<Program> program(new Program(runtime, spec.num_buffers));
  for (std::size_t i = 0; i < spec.tasks.size(); ++i) {
    const TaskSpec& task = spec.tasks[i];
    std::vector<device::TensorDesc> descs;
    for (const ViewSpec& view : task.tensors) {
      GPUOS_ASSIGN_OR_RETURN(auto desc, PlaceholderDesc(view));
      descs.push_back(desc);
    }
    runtime::TaskOptions options;
    options.out_dtype = task.out_dtype;
    auto id = program->graph_.Add(task.op, task.dtype, descs, task.attributes, task.deps, options);
    if (!id.ok()) return id.status().WithContext("program task " + std::to_string(i));
    if (*id != i) return Internal("task ids of the program and its graph differ");
  }
  const auto& tensors = program->graph_.tensors();
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    GPUOS_ASSIGN_OR_RETURN(auto binding,
                           DecodePlaceholder(static_cast<std::uint32_t>(k), tensors[k].data));
    program->bindings_.push_back(binding);
  }
  (void)program->graph_.successors();  // flatten once, not on the first run
  return program;
}

Status Program::Bind(const unsigned long long* addresses, std::uint32_t num_buffers) {
  if (num_buffers != num_buffers_) {
    return InvalidArgument("the program has " + std::to_string(num_buffers_) + " buffers; got " +
                           std::to_string(num_buffers) + " addresses");
  }
  // Submit copies the descriptors, so the next run may rebind them as soon
  // as Submit returns.
  for (const Binding& binding : bindings_) {
    GPUOS_RETURN_IF_ERROR(graph_.SetTensorAddress(
        binding.tensor_index,
        addresses[binding.buffer] + static_cast<unsigned long long>(binding.byte_offset)));
  }
  return Status::Ok();
}

Status Program::Launch(const unsigned long long* addresses, std::uint32_t num_buffers,
                       CUstream stream) {
  StepTimer reclaim(LaunchStep::kReclaim);
  while (!pending_.empty() && pending_.front().Ready()) {
    const runtime::Future previous = pending_.front();
    pending_.pop_front();
    GPUOS_RETURN_IF_ERROR(
        previous.Wait(std::chrono::microseconds(0)).WithContext("an earlier run of this program"));
  }
  reclaim.Stop();
  StepTimer bind(LaunchStep::kBind);
  GPUOS_RETURN_IF_ERROR(Bind(addresses, num_buffers));
  bind.Stop();
  StepTimer query(LaunchStep::kStreamQuery);
  GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* driver, LoadCudaDriver());
  if (stream == nullptr) stream = CU_STREAM_LEGACY;
  const CUresult idle = driver->cuStreamQuery(stream);
  if (idle == CUDA_ERROR_NOT_READY) {
    GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, driver->cuStreamSynchronize(stream),
                                     "cuStreamSynchronize (PyTorch's current stream)"));
  } else {
    GPUOS_RETURN_IF_ERROR(CudaStatus(*driver, idle, "cuStreamQuery (PyTorch's current stream)"));
  }
  query.Stop();
  StepTimer submit(LaunchStep::kSubmit);
  GPUOS_ASSIGN_OR_RETURN(const runtime::Future launched, runtime_->Submit(graph_));
  submit.Stop();
  pending_.push_back(launched);
  StepTimer wait(LaunchStep::kStreamWait);
  const Status ordered = runtime_->StreamWaitFor(stream, launched);
  wait.Stop();
  if (ordered.code() != StatusCode::kFailedPrecondition) return ordered;
  // A device without 64-bit stream memory operations: the stream cannot
  // wait on the device, so the host waits for the results instead.
  pending_.pop_back();
  return launched.Wait();
}

}  // namespace gpuos::torch_bridge
