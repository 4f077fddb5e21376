// Dispatch benchmarks of the persistent-kernel runtime (bench/README.md):
//   chain100_64x64_f32   100 dependent `add` ops on a 64x64 f32 tensor:
//                        cuda_launch (one launch of the one-shot worker per op),
//                        cuda_graph (those launches captured in a CUDA graph),
//                        cuda_one_kernel (one launch of one block running the
//                        100 tasks in order: operator time without dispatch),
//                        gpuos (one submitted graph, worker running)
//   dispatch_chain       per step, a chain of 10000 dependent no-op tasks
//   dispatch_independent per task, 20000 independent no-op tasks in one graph
//   roundtrip_empty      Submit -> Wait of one no-op: worker running / parked
// Results are checked (chain) before timing; variants are interleaved.
//
//   gpuos_bench_dispatch OUT.json [iterations]
//
// Diagnostics (off by default):
//   GPUOS_BENCH_TILES=2,4,8  also chain100 with each add split into that many
//                            tiles (TaskOptions::tiles): variants gpuos_tilesN
//   GPUOS_PHASE_TIMING=1     build an instrumented image
//                            (gpuos/device/phase_timing.cuh): chain100 runs
//                            only cuda_one_kernel and gpuos, and the cycles
//                            per phase of both are printed (timings are not
//                            comparable with an uninstrumented run)
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "../tests/core/runtime_test_util.h"
#include "bench_util.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/device/phase_timing.cuh"

namespace gpuos::runtime {
namespace {

using bench::Clock;
using bench::Samples;

double Since(Clock::time_point t0) { return bench::MicrosecondsSince(t0); }

#define CHECK_OK(expr) GPUOS_BENCH_CHECK(expr)
#define CHECK_CU(expr) CHECK_OK(CudaStatus(*d, (expr), #expr))

int Main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "dispatch.json";
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 200;
  std::string skip, error;
  RuntimeConfig config;
  if (const char* blocks = std::getenv("GPUOS_BENCH_BLOCKS")) {
    config.blocks = static_cast<unsigned int>(std::atoi(blocks));
  }
  auto runtime = testing::OpenTestRuntime(config, &skip, &error);
  if (!runtime) {
    std::fprintf(stderr, "dispatch benchmark: %s\n", (skip + error).c_str());
    return skip.empty() ? 1 : 0;
  }
  const CudaDriverApi* d = *LoadCudaDriver();
  constexpr long long kN = 64 * 64;
  constexpr int kOps = 100;

  // Tensors and the CPU reference of the chain.
  std::vector<float> x0(kN), ones(kN, 1.0f);
  for (long long i = 0; i < kN; ++i) x0[i] = std::sin(static_cast<float>(i)) * 3;
  auto alpha_of = [](int i) { return 0.25 * ((i % 5) - 2) + 0.125; };
  std::vector<float> reference = x0;
  for (int i = 0; i < kOps; ++i) {
    for (float& v : reference) v = v + static_cast<float>(alpha_of(i)) * 1.0f;
  }
  auto a = testing::Upload(*runtime, x0);
  auto b = testing::Upload(*runtime, std::vector<float>(kN, NAN));
  auto one = testing::Upload(*runtime, ones);
  CHECK_OK(a);
  CHECK_OK(b);
  CHECK_OK(one);
  testing::DeviceTensor* bufs[2] = {&*a, &*b};
  auto reset = [&] { CHECK_OK(runtime->CopyToDevice(a->buffer.address, x0.data(), kN * 4)); };
  auto check = [&] {
    auto out = testing::Download(*runtime, *bufs[kOps % 2]);
    CHECK_OK(out);
    for (long long i = 0; i < kN; ++i) {
      if (std::abs((*out)[i] - reference[i]) > 1e-4f * (1 + std::abs(reference[i]))) return false;
    }
    return true;
  };

  // gpuos: the chain as one graph (tiles 0: the runtime's choice).
  auto make_chain = [&](std::uint32_t tiles) {
    auto graph = std::make_unique<TaskGraph>(*runtime);
    TaskOptions options;
    options.tiles = tiles;
    for (int i = 0; i < kOps; ++i) {
      std::vector<TaskId> deps;
      if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
      CHECK_OK(graph->Add("add", DType::kF32,
                          {bufs[i % 2]->desc, one->desc, bufs[(i + 1) % 2]->desc},
                          {{"alpha", std::to_string(alpha_of(i))}}, deps, options));
    }
    return graph;
  };
  const std::unique_ptr<TaskGraph> chain_graph = make_chain(0);
  const TaskGraph& chain = *chain_graph;
  const bool phase_timing = runtime->ImageGlobal("gpuos_phase_cycles").ok();
  // Baselines: the same tasks, one launch of the one-shot worker each.
  CUmodule module = nullptr;
  CUfunction worker = nullptr;
  CHECK_OK(runtime->WaitUntilParked());
  CHECK_CU(d->cuModuleLoadData(&module, runtime->image().cubin.data()));
  CHECK_CU(d->cuModuleGetFunction(&worker, module, registry::kWorkerKernelSymbol));
  CUdeviceptr alias_table = 0;
  std::size_t alias_bytes = 0;
  CHECK_CU(d->cuModuleGetGlobal(&alias_table, &alias_bytes, module, registry::kAliasTableSymbol));
  std::vector<device::TaskDesc> tasks = chain.tasks();
  for (device::TaskDesc& t : tasks) t.logical_op = 0;  // this module's alias table is empty
  auto task_buffer = runtime->Allocate(tasks.size() * sizeof(device::TaskDesc));
  auto desc_buffer = runtime->Allocate(chain.tensors().size() * sizeof(device::TensorDesc));
  CHECK_OK(task_buffer);
  CHECK_OK(desc_buffer);
  CHECK_OK(runtime->CopyToDevice(task_buffer->address, tasks.data(),
                                 tasks.size() * sizeof(device::TaskDesc)));
  CHECK_OK(runtime->CopyToDevice(desc_buffer->address, chain.tensors().data(),
                                 chain.tensors().size() * sizeof(device::TensorDesc)));
  CUstream stream = nullptr;
  CHECK_CU(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  std::vector<device::WorkerParams> params(kOps);
  auto launch_all = [&] {
    for (int i = 0; i < kOps; ++i) {
      params[i] = {};
      params[i].tasks = task_buffer->address + i * sizeof(device::TaskDesc);
      params[i].tensors = desc_buffer->address;
      params[i].num_tasks = 1;
      params[i].num_tensors = static_cast<unsigned int>(chain.tensors().size());
      void* args[] = {&params[i]};
      CHECK_CU(d->cuLaunchKernel(worker, 1, 1, 1, device::kWorkerThreads, 1, 1, 0, stream, args,
                                 nullptr));
    }
  };
  device::WorkerParams serial = {};
  serial.tasks = task_buffer->address;
  serial.tensors = desc_buffer->address;
  serial.num_tasks = kOps;
  serial.num_tensors = static_cast<unsigned int>(chain.tensors().size());
  CUgraph graph = nullptr;
  CUgraphExec graph_exec = nullptr;
  CHECK_CU(d->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  launch_all();
  CHECK_CU(d->cuStreamEndCapture(stream, &graph));
  CHECK_CU(d->cuGraphInstantiate(&graph_exec, graph, 0));

  std::map<std::string, std::function<void()>> chain_variants = {
      {"cuda_launch",
       [&] {
         launch_all();
         CHECK_CU(d->cuStreamSynchronize(stream));
       }},
      {"cuda_graph",
       [&] {
         CHECK_CU(d->cuGraphLaunch(graph_exec, stream));
         CHECK_CU(d->cuStreamSynchronize(stream));
       }},
      {"cuda_one_kernel",
       [&] {
         void* args[] = {&serial};
         CHECK_CU(d->cuLaunchKernel(worker, 1, 1, 1, device::kWorkerThreads, 1, 1, 0, stream, args,
                                    nullptr));
         CHECK_CU(d->cuStreamSynchronize(stream));
       }},
      {"gpuos",
       [&] {
         auto f = runtime->Submit(chain);
         CHECK_OK(f);
         CHECK_OK(f->Wait(std::chrono::seconds(5)));
       }},
  };
  std::vector<std::unique_ptr<TaskGraph>> tiled_chains;
  if (const char* tiles = std::getenv("GPUOS_BENCH_TILES"); tiles != nullptr && !phase_timing) {
    for (const char* p = tiles; *p != '\0';) {
      char* end = nullptr;
      const unsigned long n = std::strtoul(p, &end, 10);
      if (end == p) break;
      if (n >= 1) {
        tiled_chains.push_back(make_chain(static_cast<std::uint32_t>(n)));
        const TaskGraph* tiled = tiled_chains.back().get();
        chain_variants["gpuos_tiles" + std::to_string(n)] = [&runtime, tiled] {
          auto f = runtime->Submit(*tiled);
          CHECK_OK(f);
          CHECK_OK(f->Wait(std::chrono::seconds(5)));
        };
      }
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (phase_timing) {
    chain_variants.erase("cuda_launch");
    chain_variants.erase("cuda_graph");
  }
  TaskGraph noop(*runtime);
  CHECK_OK(noop.AddNoop());
  auto warm = [&] {  // make sure the worker is running
    auto f = runtime->Submit(noop);
    CHECK_OK(f);
    CHECK_OK(f->Wait(std::chrono::seconds(5)));
  };
  std::map<std::string, bool> correct;
  for (auto& [name, run] : chain_variants) {  // correctness, then warm-up
    if (name.rfind("gpuos", 0) == 0)
      warm();
    else
      CHECK_OK(runtime->WaitUntilParked());
    reset();
    CHECK_OK(runtime->CopyToDevice(b->buffer.address, std::vector<float>(kN, NAN).data(), kN * 4));
    run();
    correct[name] = check();
    for (int w = 0; w < 5; ++w) run();
  }
  // Phase timing: zero the sums of both images (the runtime's, this
  // module's) after the warm-up, print them after the chain runs.
  const std::array<const char*, 2> phase_symbols = {"gpuos_phase_cycles", "gpuos_phase_counts"};
  auto phase_sums = [&](bool clear) {
    std::array<std::array<std::uint64_t, device::kPhaseSlots>, 4> sums = {};
    for (int s = 0; s < 2; ++s) {
      auto global = runtime->ImageGlobal(phase_symbols[s]);
      CHECK_OK(global);
      CUdeviceptr local = 0;
      std::size_t local_bytes = 0;
      CHECK_CU(d->cuModuleGetGlobal(&local, &local_bytes, module, phase_symbols[s]));
      const std::size_t bytes = sizeof(sums[0]);
      if (clear) {
        CHECK_OK(runtime->CopyToDevice(global->address, sums[s].data(), bytes));
        CHECK_OK(runtime->CopyToDevice(local, sums[s].data(), bytes));
      } else {
        CHECK_OK(runtime->CopyToHost(sums[s].data(), global->address, bytes));
        CHECK_OK(runtime->CopyToHost(sums[2 + s].data(), local, bytes));
      }
    }
    return sums;
  };
  if (phase_timing) phase_sums(true);
  std::map<std::string, Samples> chain_samples;
  for (int it = 0; it < iterations; ++it) {
    for (auto& [name, run] : chain_variants) {
      if (name.rfind("gpuos", 0) == 0)
        warm();
      else
        CHECK_OK(runtime->WaitUntilParked());
      const auto t0 = Clock::now();
      run();
      chain_samples[name].us.push_back(Since(t0));
    }
  }

  if (phase_timing) {
    CHECK_OK(runtime->WaitUntilParked());  // also measures the SM clock
    const double mhz =
        runtime->stats().worker_sm_clock_mhz > 0 ? runtime->stats().worker_sm_clock_mhz : 1980.0;
    const auto sums = phase_sums(false);
    const char* names[] = {"queue: window, tile copy, claim",
                           "queue: tensor descriptors",
                           "queue: gpuos_run_task (thread 0)",
                           "queue: barrier after the op",
                           "queue: completion/successor",
                           "queue: whole step",
                           "one-shot: gpuos_run_task (thread 0)",
                           "one-shot: barrier + count",
                           "op: arity/dtype checks",
                           "op: ElementwiseTile (dense check)",
                           "op: operands, attributes",
                           "op: loop (loads, body, stores)",
                           "stage: wait",
                           "stage: rows / scores",
                           "stage: products / softmax",
                           "stage: stores / out",
                           "direct: admitting, to the opening",
                           "direct: admitting, read-back",
                           "direct: helper, wait for opening",
                           "direct: helper, task and claim",
                           "direct: setup",
                           "direct: barrier before the call",
                           "direct: the call and the count",
                           "direct: completion",
                           "queue: slot read and parse",
                           "queue: claim after the tail read",
                           "direct: tile items",
                           "direct: recorder start",
                           "queue: tail read showing work"};
    static_assert(sizeof(names) / sizeof(names[0]) == device::kPhaseSlots,
                  "a name for every phase slot (device/include/gpuos/device/phase_timing.cuh)");
    std::printf(
        "phase timing (thread 0, SM clock %.0f MHz): image slot name count "
        "cycles/count us/count\n",
        mhz);
    for (int image = 0; image < 2; ++image) {
      for (int k = 0; k < device::kPhaseSlots; ++k) {
        const std::uint64_t cycles = sums[2 * image][k];
        const std::uint64_t count = sums[2 * image + 1][k];
        if (count == 0) continue;
        const double per = static_cast<double>(cycles) / static_cast<double>(count);
        std::printf("phase %-8s %2d %-36s %8llu %10.1f %8.3f\n",
                    image == 0 ? "runtime" : "one-shot", k, names[k],
                    static_cast<unsigned long long>(count), per, per / mhz);
      }
    }
  }

  // Dispatch microbenchmarks (no-op tasks).
  constexpr int kChain = 10000, kIndependent = 20000;
  TaskGraph long_chain(*runtime), independent(*runtime);
  for (int i = 0; i < kChain; ++i) {
    std::vector<TaskId> deps;
    if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
    CHECK_OK(long_chain.AddNoop(deps));
  }
  for (int i = 0; i < kIndependent; ++i) CHECK_OK(independent.AddNoop());
  auto timed = [&](const TaskGraph& g) {
    const auto t0 = Clock::now();
    auto f = runtime->Submit(g);
    CHECK_OK(f);
    CHECK_OK(f->Wait(std::chrono::seconds(5)));
    return Since(t0);
  };
  std::map<std::string, Samples> micro;
  const int micro_iterations = std::max(10, iterations / 4);
  for (int it = 0; it < micro_iterations + 3; ++it) {
    warm();
    const double c = timed(long_chain) / kChain;
    warm();
    const double n = timed(independent) / kIndependent;
    warm();
    const double r = timed(noop);
    CHECK_OK(runtime->WaitUntilParked());
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    const double p = timed(noop);
    if (it < 3) continue;  // warm-up
    micro["dispatch_chain"].us.push_back(c);
    micro["dispatch_independent"].us.push_back(n);
    micro["roundtrip_running"].us.push_back(r);
    micro["roundtrip_parked"].us.push_back(p);
  }

  nlohmann::json doc;
  const char* commit = std::getenv("GPUOS_COMMIT");
  doc["commit"] = commit != nullptr ? commit : "unknown";
  doc["device"] = runtime->device_name();
  doc["driver"] = d->driver_version;
  doc["cuda"] =
      std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  doc["worker_blocks"] = runtime->stats().worker_blocks;
  auto add_case = [&](const std::string& workload, const std::string& variant, const Samples& s,
                      bool ok, const std::string& unit) {
    doc["cases"].push_back({{"workload", workload},
                            {"variant", variant},
                            {"unit", unit},
                            {"median_us", s.Percentile(0.5)},
                            {"p10_us", s.Percentile(0.1)},
                            {"p90_us", s.Percentile(0.9)},
                            {"iterations", s.us.size()},
                            {"correct", ok}});
    std::printf("%-22s %-12s %10.3f %10.3f %10.3f  %s%s\n", workload.c_str(), variant.c_str(),
                s.Percentile(0.5), s.Percentile(0.1), s.Percentile(0.9), unit.c_str(),
                ok ? "" : "  WRONG RESULTS");
  };
  std::printf("%-22s %-12s %10s %10s %10s\n", "workload", "variant", "median_us", "p10_us",
              "p90_us");
  for (auto& [name, s] : chain_samples) {
    add_case("chain100_64x64_f32", name, s, correct[name], "us/chain");
  }
  add_case("dispatch_chain", "gpuos", micro["dispatch_chain"], true, "us/step");
  add_case("dispatch_independent", "gpuos", micro["dispatch_independent"], true, "us/task");
  add_case("roundtrip_empty", "gpuos_running", micro["roundtrip_running"], true, "us");
  add_case("roundtrip_empty", "gpuos_parked", micro["roundtrip_parked"], true, "us");
  const double launch = chain_samples["cuda_launch"].Percentile(0.5);
  const double cgraph = chain_samples["cuda_graph"].Percentile(0.5);
  const double ours = chain_samples["gpuos"].Percentile(0.5);
  doc["ratios"] = {{"cuda_launch_over_gpuos", launch / ours},
                   {"cuda_graph_over_gpuos", cgraph / ours}};
  std::printf("chain100: cuda_launch/gpuos = %.2fx, cuda_graph/gpuos = %.2fx\n", launch / ours,
              cgraph / ours);
  const RuntimeStats stats = runtime->stats();
  doc["runtime_stats"] = {{"launches", stats.launches},
                          {"parks", stats.parks},
                          {"submissions", stats.submissions},
                          {"worker_sm_clock_mhz", stats.worker_sm_clock_mhz}};
  std::printf("worker blocks %u, SM clock seen by the worker %.0f MHz\n", stats.worker_blocks,
              stats.worker_sm_clock_mhz);
  std::ofstream(out_path) << doc.dump(2) << "\n";
  CHECK_OK(runtime->WaitUntilParked());
  (void)d->cuGraphExecDestroy(graph_exec);
  (void)d->cuGraphDestroy(graph);
  (void)d->cuStreamDestroy(stream);
  (void)d->cuModuleUnload(module);
  bool all_correct = true;
  for (auto& [name, ok] : correct) all_correct = all_correct && ok;
  return all_correct ? 0 : 1;
}

}  // namespace
}  // namespace gpuos::runtime

int main(int argc, char** argv) { return gpuos::runtime::Main(argc, argv); }
