#include "demo_gpu.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "gpuos/cuda_driver.h"
#include "gpuos/device/abi.h"
#include "gpuos/registry/codegen.h"

namespace gpuos::cli {
namespace {

namespace dev = gpuos::device;
using registry::SemVer;

constexpr long long kElements = 1 << 20;
constexpr long long kElementsPerTask = 8192;

#define GPUOS_CU(call, what) GPUOS_RETURN_IF_ERROR(CudaStatus(*d, (call), what))

const registry::OperatorSpec* FindSpec(const std::vector<registry::OperatorSpec>& ops,
                                       const registry::ImageEntry& entry) {
  for (const auto& op : ops) {
    if (op.name == entry.op_name && op.version == entry.version) return &op;
  }
  return nullptr;
}

// Device memory that is freed when the demo ends (no worker runs then).
class DeviceBuffers {
 public:
  explicit DeviceBuffers(const CudaDriverApi* d) : d_(d) {}
  ~DeviceBuffers() {
    for (CUdeviceptr p : ptrs_) d_->cuMemFree(p);
  }
  Expected<CUdeviceptr> Alloc(std::size_t bytes) {
    CUdeviceptr p = 0;
    GPUOS_RETURN_IF_ERROR(CudaStatus(*d_, d_->cuMemAlloc(&p, bytes), "cuMemAlloc"));
    ptrs_.push_back(p);
    return p;
  }

 private:
  const CudaDriverApi* d_;
  std::vector<CUdeviceptr> ptrs_;
};

struct Step {
  std::string op;
  std::vector<int> tensors;  // indices into the tensor table: inputs, then outputs
  std::vector<std::pair<std::string, std::string>> attributes;
};

}  // namespace

Expected<std::string> DescribeGpu() {
  GPUOS_ASSIGN_OR_RETURN(auto info, QueryCudaDevice(0));
  return info.name + " (sm_" + std::to_string(info.compute_major) +
         std::to_string(info.compute_minor) + ", " + std::to_string(info.multiprocessors) +
         " SMs, driver " + std::to_string(info.driver_version) + ")";
}

Expected<nlohmann::json> RunDemoOnGpu(const registry::KernelImage& image,
                                      const std::vector<registry::OperatorSpec>& ops,
                                      const Output& out) {
  GPUOS_ASSIGN_OR_RETURN(const CudaDriverApi* d, LoadCudaDriver());
  CUdevice device = 0;
  CUcontext context = nullptr;
  GPUOS_CU(d->cuDeviceGet(&device, 0), "cuDeviceGet");
  GPUOS_CU(d->cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  GPUOS_CU(d->cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUmodule module = nullptr;
  GPUOS_CU(d->cuModuleLoadData(&module, image.cubin.data()), "cuModuleLoadData(kernel image)");
  CUfunction worker = nullptr;
  GPUOS_CU(d->cuModuleGetFunction(&worker, module, registry::kWorkerKernelSymbol),
           "cuModuleGetFunction(gpuos_worker)");

  // a, b random; t = a * b; u = t + 2 * a; out = relu(u).
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(kElements), b(kElements);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);

  DeviceBuffers buffers(d);
  const std::size_t bytes = kElements * sizeof(float);
  std::vector<dev::TensorDesc> tensors;
  for (int i = 0; i < 5; ++i) {
    GPUOS_ASSIGN_OR_RETURN(CUdeviceptr p, buffers.Alloc(bytes));
    GPUOS_CU(d->cuMemsetD8(p, 0xff, bytes), "cuMemsetD8(poison)");  // NaN everywhere
    const long long sizes[1] = {kElements};
    tensors.push_back(dev::MakeContiguousTensorDesc(p, dev::kDTypeF32, 1, sizes));
  }
  GPUOS_CU(d->cuMemcpyHtoD(tensors[0].data, a.data(), bytes), "cuMemcpyHtoD(a)");
  GPUOS_CU(d->cuMemcpyHtoD(tensors[1].data, b.data(), bytes), "cuMemcpyHtoD(b)");
  GPUOS_ASSIGN_OR_RETURN(CUdeviceptr tensor_table,
                         buffers.Alloc(tensors.size() * sizeof(dev::TensorDesc)));
  GPUOS_CU(d->cuMemcpyHtoD(tensor_table, tensors.data(), tensors.size() * sizeof(dev::TensorDesc)),
           "cuMemcpyHtoD(tensors)");
  GPUOS_ASSIGN_OR_RETURN(CUdeviceptr status_ptr, buffers.Alloc(sizeof(dev::WorkerStatus)));
  GPUOS_CU(d->cuMemsetD8(status_ptr, 0, sizeof(dev::WorkerStatus)), "cuMemsetD8(status)");

  const std::vector<Step> steps = {
      {"mul", {0, 1, 2}, {}}, {"add", {2, 0, 3}, {{"alpha", "2"}}}, {"relu", {3, 4}, {}}};
  nlohmann::json step_json = nlohmann::json::array();
  unsigned int expected_completed = 0;
  double total_ms = 0;
  for (const auto& step : steps) {
    const registry::ImageEntry* entry = image.FindLatest(step.op, DType::kF32);
    if (entry == nullptr) {
      return NotFound("the kernel image has no f32 '" + step.op + "'; publish the built-in packs");
    }
    const registry::OperatorSpec* spec = FindSpec(ops, *entry);
    if (spec == nullptr) return Internal("no spec for image entry " + entry->symbol);
    GPUOS_ASSIGN_OR_RETURN(auto slots, registry::EncodeAttributeSlots(*spec, step.attributes));
    std::vector<dev::TaskDesc> tasks;
    for (long long begin = 0; begin < kElements; begin += kElementsPerTask) {
      dev::TaskDesc task = {};
      task.opcode = entry->slot;
      task.task_id = static_cast<unsigned int>(tasks.size());
      task.num_tensors = static_cast<unsigned int>(step.tensors.size());
      task.begin = begin;
      task.end = std::min(begin + kElementsPerTask, kElements);
      for (std::size_t k = 0; k < step.tensors.size(); ++k) task.tensors[k] = step.tensors[k];
      for (std::size_t k = 0; k < slots.size(); ++k) task.scalars[k].bits = slots[k];
      task.dependency_counter = dev::kNoDependencyCounter;
      tasks.push_back(task);
    }
    GPUOS_ASSIGN_OR_RETURN(CUdeviceptr task_ptr,
                           buffers.Alloc(tasks.size() * sizeof(dev::TaskDesc)));
    GPUOS_CU(d->cuMemcpyHtoD(task_ptr, tasks.data(), tasks.size() * sizeof(dev::TaskDesc)),
             "cuMemcpyHtoD(tasks)");
    dev::WorkerParams params = {};
    params.tasks = task_ptr;
    params.tensors = tensor_table;
    params.status = status_ptr;
    params.num_tasks = static_cast<unsigned int>(tasks.size());
    params.num_tensors = static_cast<unsigned int>(tensors.size());
    void* args[] = {&params};
    auto t0 = std::chrono::steady_clock::now();
    GPUOS_CU(d->cuLaunchKernel(worker, params.num_tasks, 1, 1, dev::kWorkerThreads, 1, 1, 0,
                               nullptr, args, nullptr),
             "cuLaunchKernel(gpuos_worker)");
    GPUOS_CU(d->cuCtxSynchronize(), "running " + step.op);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total_ms += ms;
    expected_completed += params.num_tasks;
    step_json.push_back({{"op", step.op},
                         {"version", entry->version.ToString()},
                         {"slot", entry->slot},
                         {"tasks", tasks.size()},
                         {"launch_to_sync_ms", ms}});
  }
  dev::WorkerStatus status = {};
  GPUOS_CU(d->cuMemcpyDtoH(&status, status_ptr, sizeof(status)), "cuMemcpyDtoH(status)");
  if (status.error != dev::kWorkerOk) {
    return Internal("the worker reported error " + std::to_string(status.error) + " on task " +
                    std::to_string(status.task_id) + " (detail " + std::to_string(status.detail) +
                    ")");
  }
  std::vector<float> result(kElements);
  GPUOS_CU(d->cuMemcpyDtoH(result.data(), tensors[4].data, bytes), "cuMemcpyDtoH(out)");
  GPUOS_CU(d->cuModuleUnload(module), "cuModuleUnload");

  double max_error = 0;
  long long mismatches = 0;
  for (long long i = 0; i < kElements; ++i) {
    const double ref = std::max(0.0, static_cast<double>(a[i]) * b[i] + 2.0 * a[i]);
    const double err = std::fabs(result[i] - ref);
    if (!(err <= 1e-5 + 1e-5 * std::fabs(ref))) ++mismatches;  // NaN counts as a mismatch
    if (err > max_error || std::isnan(err)) max_error = std::isnan(err) ? INFINITY : err;
  }
  const bool correct = mismatches == 0 && status.completed == expected_completed;
  out.Line("== ran out = relu(a*b + 2a) on " + std::to_string(kElements) +
           " f32 elements through the image's worker: " + std::to_string(status.completed) +
           " tasks, max |error| vs CPU " + std::to_string(max_error) + ", " +
           (correct ? "correct" : std::to_string(mismatches) + " MISMATCHES"));
  if (!correct) return Internal("GPU results differ from the CPU reference");
  return nlohmann::json{{"ran", true},
                        {"elements", kElements},
                        {"steps", step_json},
                        {"tasks_completed", status.completed},
                        {"max_abs_error", max_error},
                        {"correct", correct},
                        {"total_launch_to_sync_ms", total_ms}};
}

}  // namespace gpuos::cli
