#include "demo_compare.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "gpuos/environment.h"

namespace gpuos::cli {
namespace {

namespace dev = gpuos::device;
using Clock = std::chrono::steady_clock;

dev::TensorDesc Describe(const WorkloadTensor& t, std::uint64_t address) {
  dev::TensorDesc desc = dev::MakeContiguousTensorDesc(
      address, dev::kDTypeF32, static_cast<int>(t.sizes.size()), t.sizes.data());
  for (std::size_t d = 0; d < t.strides.size(); ++d) desc.strides[d] = t.strides[d];
  return desc;
}

VariantResult Summarize(const std::string& workload, const std::string& variant,
                        std::vector<double> us) {
  VariantResult r;
  r.workload = workload;
  r.variant = variant;
  std::sort(us.begin(), us.end());
  r.iterations = static_cast<int>(us.size());
  r.median_us = us[us.size() / 2];
  r.p10_us = us[us.size() / 10];
  r.p90_us = us[us.size() * 9 / 10];
  return r;
}

double Elapsed(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

Expected<std::vector<VariantResult>> CompareWorkload(const Workload& w,
                                                     const registry::KernelImage& image,
                                                     const std::vector<registry::OperatorSpec>& ops,
                                                     runtime::Runtime& rt, int rounds,
                                                     int per_round) {
  const std::size_t out_bytes = w.reference.size() * sizeof(float);
  const std::vector<unsigned char> poison(out_bytes, 0xff);

  // Plain launches: own module, own buffers.
  GPUOS_RETURN_IF_ERROR(rt.WaitUntilParked());
  GPUOS_ASSIGN_OR_RETURN(auto launcher, OneShotLauncher::Load(image, ops));
  // On every way out, the launcher's module unload and frees wait for the
  // persistent worker to park first (they would block on it otherwise).
  struct ParkBeforeRelease {
    runtime::Runtime& rt;
    std::unique_ptr<OneShotLauncher>& launcher;
    ~ParkBeforeRelease() {
      if (launcher != nullptr) {
        (void)rt.WaitUntilParked();
        launcher.reset();
      }
    }
  } park_before_release{rt, launcher};
  std::vector<dev::TensorDesc> launch_descs;
  for (const auto& t : w.tensors) {
    GPUOS_ASSIGN_OR_RETURN(CUdeviceptr p, launcher->Allocate(t.elements * sizeof(float)));
    if (!t.values.empty()) {
      GPUOS_RETURN_IF_ERROR(launcher->Upload(p, t.values.data(), t.values.size() * sizeof(float)));
    } else {
      GPUOS_RETURN_IF_ERROR(launcher->Poison(p, t.elements * sizeof(float)));
    }
    launch_descs.push_back(Describe(t, p));
  }
  GPUOS_RETURN_IF_ERROR(launcher->Prepare(launch_descs, w.steps));

  // The runtime: buffers from its allocator, one graph submitted each run.
  std::vector<dev::TensorDesc> rt_descs;
  std::vector<runtime::DeviceBuffer> buffers;
  for (const auto& t : w.tensors) {
    GPUOS_ASSIGN_OR_RETURN(auto buffer, rt.Allocate(t.elements * sizeof(float)));
    buffers.push_back(buffer);
    if (!t.values.empty()) {
      GPUOS_RETURN_IF_ERROR(
          rt.CopyToDevice(buffer.address, t.values.data(), t.values.size() * sizeof(float)));
    } else {
      std::vector<unsigned char> nan(t.elements * sizeof(float), 0xff);
      GPUOS_RETURN_IF_ERROR(rt.CopyToDevice(buffer.address, nan.data(), nan.size()));
    }
    rt_descs.push_back(Describe(w.tensors[rt_descs.size()], buffer.address));
  }
  runtime::TaskGraph graph(rt);
  std::vector<runtime::TaskId> previous;
  for (const auto& step : w.steps) {
    std::vector<dev::TensorDesc> descs;
    for (int index : step.tensors) descs.push_back(rt_descs[index]);
    GPUOS_ASSIGN_OR_RETURN(runtime::TaskId id,
                           graph.Add(step.op, step.dtype, descs, step.attributes, previous));
    previous = {id};
  }

  // Correctness first, on poisoned outputs.
  std::vector<VariantResult> results;
  std::vector<float> got(w.reference.size());
  GPUOS_RETURN_IF_ERROR(launcher->Run());
  GPUOS_RETURN_IF_ERROR(launcher->Download(got.data(), launch_descs[w.output].data, out_bytes));
  double launch_error = 0;
  const bool launch_ok = CountMismatches(w, got, &launch_error) == 0;
  GPUOS_ASSIGN_OR_RETURN(auto future, rt.Submit(graph));
  GPUOS_RETURN_IF_ERROR(future.Wait());
  GPUOS_RETURN_IF_ERROR(rt.CopyToHost(got.data(), rt_descs[w.output].data, out_bytes));
  double rt_error = 0;
  const bool rt_ok = CountMismatches(w, got, &rt_error) == 0;

  std::vector<double> launch_us, rt_us;
  for (int round = 0; round < rounds; ++round) {
    GPUOS_RETURN_IF_ERROR(rt.WaitUntilParked());
    for (int i = 0; i < per_round; ++i) {
      auto t0 = Clock::now();
      GPUOS_RETURN_IF_ERROR(launcher->Run());
      launch_us.push_back(Elapsed(t0));
    }
    // One untimed run relaunches the worker; the timed ones find it warm.
    GPUOS_ASSIGN_OR_RETURN(auto warm, rt.Submit(graph));
    GPUOS_RETURN_IF_ERROR(warm.Wait());
    for (int i = 0; i < per_round; ++i) {
      auto t0 = Clock::now();
      GPUOS_ASSIGN_OR_RETURN(auto f, rt.Submit(graph));
      GPUOS_RETURN_IF_ERROR(f.Wait());
      rt_us.push_back(Elapsed(t0));
    }
  }
  GPUOS_RETURN_IF_ERROR(rt.WaitUntilParked());
  launcher.reset();  // module unload and frees: the worker is parked
  for (const auto& buffer : buffers) rt.Free(buffer);

  if (GetEnv("GPUOS_DEMO_SAMPLES")) {  // diagnostic: every run, in order
    for (const auto* samples : {&launch_us, &rt_us}) {
      std::fprintf(stderr, "%s %s (us, in run order, %d a round):", w.name.c_str(),
                   samples == &launch_us ? "cuda_launch" : "gpuos", per_round);
      for (double us : *samples) std::fprintf(stderr, " %.0f", us);
      std::fprintf(stderr, "\n");
    }
  }
  results.push_back(Summarize(w.name, "cuda_launch", launch_us));
  results.back().correct = launch_ok;
  results.back().max_abs_error = launch_error;
  results.push_back(Summarize(w.name, "gpuos", rt_us));
  results.back().correct = rt_ok;
  results.back().max_abs_error = rt_error;
  return results;
}

}  // namespace gpuos::cli
