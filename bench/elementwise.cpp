// elementwise_large_f32 (bench/README.md): out = a + b (`add`, f32, alpha 1)
// over 2^28 elements, against the device's copy bandwidth.
//
//   gpuos          one task submitted to the runtime, tiled the way TaskGraph
//                  tiles it by default (TaskOptions::tiles = 0), worker running
//   copy_ceiling   cuMemcpyDtoDAsync of one 2^28-element f32 buffer
//
// Bandwidth counts every byte each variant must move: the copy reads and
// writes one buffer (2 x 1 GiB), the add reads two and writes one (3 x 1 GiB).
// The result to quote is gpuos's bandwidth over the copy's (target >= 0.85).
// Times are host wall clock around Submit -> Wait and around copy ->
// cuStreamSynchronize: each includes one host round trip (~10 us of ~1 ms).
//
// Diagnostics (JSON "diagnostic": true; not the result):
//   gpuos_tilesN   the same task with TaskOptions::tiles = N; N from
//                  GPUOS_BENCH_TILES (comma separated, "none" for none;
//                  default 128,512,528,2048,8192)
//   one_shot_bN    the same operator code without the queue: one launch of
//                  the image's one-shot worker (gpuos_worker) with N blocks,
//                  the task cut into N equal tasks (N = SMs, and the most
//                  blocks that are resident at once)
//
// Every variant is checked first on fresh random inputs against a host
// reference (every element; outputs poisoned with NaN first), then warmed up,
// then timed interleaved.
//
//   gpuos_bench_elementwise OUT.json [iterations]
//   GPUOS_BENCH_ELEMENTS (default 2^28), GPUOS_BENCH_BLOCKS (worker blocks)
#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "../tests/core/runtime_test_util.h"
#include "bench_util.h"
#include "gpuos/cuda_driver.h"

namespace gpuos::runtime {
namespace {

using bench::Clock;
using bench::MicrosecondsSince;
using bench::Samples;

#define CHECK_OK(expr) GPUOS_BENCH_CHECK(expr)
#define CHECK_CU(expr) CHECK_OK(CudaStatus(*d, (expr), #expr))

// Runs body(begin, end) over [0, n) split across the host's cores.
void ParallelFor(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunk = (n + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (std::size_t begin = 0; begin < n; begin += chunk) {
    threads.emplace_back(body, begin, std::min(n, begin + chunk));
  }
  for (std::thread& t : threads) t.join();
}

// Uniform values in [-4, 4) from splitmix64 of (seed, index).
void FillRandom(std::vector<float>& values, std::uint64_t seed) {
  ParallelFor(values.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      std::uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      values[i] = static_cast<float>(static_cast<double>(z >> 40) / (1ull << 24) * 8.0 - 4.0);
    }
  });
}

// Number of elements of `got` that differ from `want` by more than a
// relative 1e-6 (NaN counts as different).
std::size_t CountMismatches(const std::vector<float>& got, const std::vector<float>& want) {
  std::vector<std::size_t> counts(std::max(1u, std::thread::hardware_concurrency()) + 1, 0);
  std::atomic<std::size_t> next{0};
  ParallelFor(got.size(), [&](std::size_t begin, std::size_t end) {
    std::size_t bad = 0;
    for (std::size_t i = begin; i < end; ++i) {
      if (!(std::abs(got[i] - want[i]) <= 1e-6f * (1 + std::abs(want[i])))) ++bad;
    }
    counts[next++] = bad;
  });
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  return total;
}

std::vector<unsigned int> TileCounts() {
  const char* text = std::getenv("GPUOS_BENCH_TILES");
  std::string list = text != nullptr ? text : "128,512,528,2048,8192";
  std::vector<unsigned int> tiles;
  if (list == "none") return tiles;
  for (const char* p = list.c_str(); *p != '\0';) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(p, &end, 10);
    if (end == p) break;
    if (n >= 1 && n <= kMaxTiles) tiles.push_back(static_cast<unsigned int>(n));
    p = *end == ',' ? end + 1 : end;
  }
  return tiles;
}

int Main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "elementwise_large.json";
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 100;
  const long long n = std::getenv("GPUOS_BENCH_ELEMENTS") != nullptr
                          ? std::atoll(std::getenv("GPUOS_BENCH_ELEMENTS"))
                          : (1ll << 28);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  RuntimeConfig config;
  if (const char* blocks = std::getenv("GPUOS_BENCH_BLOCKS")) {
    config.blocks = static_cast<unsigned int>(std::atoi(blocks));
  }
  std::string skip, error;
  auto runtime = testing::OpenTestRuntime(config, &skip, &error);
  if (!runtime) {
    std::fprintf(stderr, "elementwise benchmark: %s\n", (skip + error).c_str());
    return skip.empty() ? 1 : 0;
  }
  const CudaDriverApi* d = *LoadCudaDriver();
  // Not in gpuos's driver table (the runtime never copies device to device).
  auto memcpy_dtod =
      reinterpret_cast<decltype(&::cuMemcpyDtoDAsync)>(dlsym(d->handle, "cuMemcpyDtoDAsync_v2"));
  if (memcpy_dtod == nullptr) {
    std::fprintf(stderr, "elementwise benchmark: %s lacks cuMemcpyDtoDAsync_v2\n",
                 d->library.c_str());
    return 1;
  }
  auto device = QueryCudaDevice(0);
  CHECK_OK(device);

  // Fresh random inputs, the host reference, device buffers.
  const std::uint64_t seed = std::random_device{}();
  std::vector<float> a(static_cast<std::size_t>(n)), b(a.size()), want(a.size()), got(a.size());
  FillRandom(a, seed);
  FillRandom(b, seed ^ 0x5bd1e995u);
  ParallelFor(a.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) want[i] = a[i] + b[i];
  });
  auto a_dev = testing::Upload(*runtime, a);
  auto b_dev = testing::Upload(*runtime, b);
  auto out_dev = testing::Upload(*runtime, want);  // poisoned before every check
  CHECK_OK(a_dev);
  CHECK_OK(b_dev);
  CHECK_OK(out_dev);
  const CUdeviceptr out = out_dev->buffer.address;

  auto make_add = [&](std::uint32_t tiles) {
    auto graph = std::make_unique<TaskGraph>(*runtime);
    TaskOptions options;
    options.tiles = tiles;
    CHECK_OK(graph->Add("add", DType::kF32, {a_dev->desc, b_dev->desc, out_dev->desc},
                        {{"alpha", "1"}}, {}, options));
    return graph;
  };
  TaskGraph noop(*runtime);
  CHECK_OK(noop.AddNoop());
  auto warm = [&] {  // the worker running, as in the dispatch benchmarks
    auto f = runtime->Submit(noop);
    CHECK_OK(f);
    CHECK_OK(f->Wait(std::chrono::seconds(5)));
  };
  auto submit = [&runtime](const TaskGraph& graph) {
    auto f = runtime->Submit(graph);
    CHECK_OK(f);
    CHECK_OK(f->Wait(std::chrono::seconds(60)));
  };

  // The one-shot worker of the runtime's image, loaded while it is parked.
  CHECK_OK(runtime->WaitUntilParked());
  CUmodule module = nullptr;
  CUfunction worker = nullptr;
  CHECK_CU(d->cuModuleLoadData(&module, runtime->image().cubin.data()));
  CHECK_CU(d->cuModuleGetFunction(&worker, module, registry::kWorkerKernelSymbol));
  int per_sm = 0;
  CHECK_CU(
      d->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, worker, device::kWorkerThreads, 0));
  CUstream stream = nullptr;
  CHECK_CU(d->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  struct Variant {
    std::function<void()> run;
    bool diagnostic = false;
    unsigned int tiles = 0;  // gpuos variants: TaskDesc::num_tiles
    unsigned int blocks = 0;
    bool gpuos = false;
  };
  std::map<std::string, Variant> variants;
  std::vector<std::unique_ptr<TaskGraph>> graphs;
  auto add_gpuos = [&](const std::string& name, std::uint32_t tiles, bool diagnostic) {
    graphs.push_back(make_add(tiles));
    const TaskGraph* graph = graphs.back().get();
    variants[name] = {[graph, &submit] { submit(*graph); }, diagnostic, graph->tasks()[0].num_tiles,
                      0, true};
  };
  add_gpuos("gpuos", 0, false);
  for (unsigned int tiles : TileCounts()) {
    add_gpuos("gpuos_tiles" + std::to_string(tiles), tiles, true);
  }
  variants["copy_ceiling"] = {[&] {
                                CHECK_CU(memcpy_dtod(out, a_dev->buffer.address, bytes, stream));
                                CHECK_CU(d->cuStreamSynchronize(stream));
                              },
                              false, 0, 0, false};
  // One-shot launches: the default task cut into `blocks` tasks whose starts
  // are multiples of 4096 elements (aligned for vector accesses).
  std::vector<DeviceBuffer> launch_buffers;
  auto add_one_shot = [&](unsigned int blocks) {
    const device::TaskDesc whole = graphs.front()->tasks()[0];
    const long long chunk = ((n + blocks - 1) / blocks + 4095) / 4096 * 4096;
    std::vector<device::TaskDesc> tasks;
    for (long long begin = 0; begin < n; begin += chunk) {
      device::TaskDesc t = whole;
      t.logical_op = 0;  // this module's alias table is empty: dispatch by slot
      t.num_tiles = 1;
      t.begin = begin;
      t.end = std::min(n, begin + chunk);
      tasks.push_back(t);
    }
    const auto& tensors = graphs.front()->tensors();
    auto task_buffer = runtime->Allocate(tasks.size() * sizeof(device::TaskDesc));
    auto desc_buffer = runtime->Allocate(tensors.size() * sizeof(device::TensorDesc));
    CHECK_OK(task_buffer);
    CHECK_OK(desc_buffer);
    CHECK_OK(runtime->CopyToDevice(task_buffer->address, tasks.data(),
                                   tasks.size() * sizeof(device::TaskDesc)));
    CHECK_OK(runtime->CopyToDevice(desc_buffer->address, tensors.data(),
                                   tensors.size() * sizeof(device::TensorDesc)));
    launch_buffers.push_back(*task_buffer);
    launch_buffers.push_back(*desc_buffer);
    auto params = std::make_shared<device::WorkerParams>();
    params->tasks = task_buffer->address;
    params->tensors = desc_buffer->address;
    params->num_tasks = static_cast<unsigned int>(tasks.size());
    params->num_tensors = static_cast<unsigned int>(tensors.size());
    variants["one_shot_b" + std::to_string(blocks)] = {
        [&, params, blocks] {
          void* args[] = {params.get()};
          CHECK_CU(d->cuLaunchKernel(worker, blocks, 1, 1, device::kWorkerThreads, 1, 1, 0, stream,
                                     args, nullptr));
          CHECK_CU(d->cuStreamSynchronize(stream));
        },
        true, 0, blocks, false};
  };
  const auto sms = static_cast<unsigned int>(device->multiprocessors);
  add_one_shot(sms);
  if (per_sm > 1) add_one_shot(sms * static_cast<unsigned int>(per_sm));

  auto prepare = [&](const Variant& v) {  // gpuos: worker running; others: parked
    if (v.gpuos) {
      warm();
    } else {
      CHECK_OK(runtime->WaitUntilParked());
    }
  };
  std::map<std::string, bool> correct;
  for (auto& [name, v] : variants) {
    // Poison (NaN in every element) while the worker is parked, and wait for
    // it: cuMemsetD8 is asynchronous, and a running worker holds every SM's
    // registers, so the memset would otherwise land after the operator.
    CHECK_OK(runtime->WaitUntilParked());
    CHECK_CU(d->cuMemsetD8(out, 0xff, bytes));
    CHECK_CU(d->cuCtxSynchronize());
    prepare(v);
    v.run();
    CHECK_OK(runtime->CopyToHost(got.data(), out, bytes));
    const std::size_t bad = CountMismatches(got, name == "copy_ceiling" ? a : want);
    correct[name] = bad == 0;
    if (bad != 0) std::fprintf(stderr, "%s: %zu of %lld elements wrong\n", name.c_str(), bad, n);
    for (int w = 0; w < 3; ++w) v.run();
  }
  std::map<std::string, Samples> samples;
  for (int it = 0; it < iterations; ++it) {
    for (auto& [name, v] : variants) {
      prepare(v);
      const auto t0 = Clock::now();
      v.run();
      samples[name].us.push_back(MicrosecondsSince(t0));
    }
  }
  CHECK_OK(runtime->WaitUntilParked());

  auto moved = [&](const std::string& name) {
    return static_cast<double>(bytes) * (name == "copy_ceiling" ? 2 : 3);
  };
  auto gbps = [&](const std::string& name, double us) { return moved(name) / us / 1e3; };
  const double copy_gbps = gbps("copy_ceiling", samples["copy_ceiling"].Percentile(0.5));
  nlohmann::json doc;
  const char* commit = std::getenv("GPUOS_COMMIT");
  doc["commit"] = commit != nullptr ? commit : "unknown";
  doc["device"] = runtime->device_name();
  doc["driver"] = d->driver_version;
  doc["cuda"] = bench::CudaHeadersVersion();
  doc["worker_blocks"] = runtime->stats().worker_blocks;
  doc["one_shot_blocks_per_sm"] = per_sm;
  doc["elements"] = n;
  doc["seed"] = seed;
  for (auto& [name, s] : samples) {
    const Variant& v = variants[name];
    nlohmann::json c = {{"workload", "elementwise_large_f32"},
                        {"variant", name},
                        {"unit", "us/op"},
                        {"median_us", s.Percentile(0.5)},
                        {"p10_us", s.Percentile(0.1)},
                        {"p90_us", s.Percentile(0.9)},
                        {"iterations", s.us.size()},
                        {"correct", correct[name]},
                        {"bytes_moved", moved(name)},
                        {"gbps", gbps(name, s.Percentile(0.5))},
                        {"of_copy_bandwidth", gbps(name, s.Percentile(0.5)) / copy_gbps},
                        {"diagnostic", v.diagnostic}};
    if (v.gpuos) c["tiles"] = v.tiles;
    if (v.blocks != 0) c["blocks"] = v.blocks;
    doc["cases"].push_back(c);
  }
  const double ours = gbps("gpuos", samples["gpuos"].Percentile(0.5));
  // The floor: the add's bytes at the copy's bandwidth.
  const double floor_us = moved("gpuos") / copy_gbps / 1e3;
  doc["floor_us"] = floor_us;
  doc["ratios"] = {{"gpuos_over_copy_bandwidth", ours / copy_gbps},
                   {"target", 0.85},
                   {"gpuos_time_over_floor", samples["gpuos"].Percentile(0.5) / floor_us}};
  std::ofstream(out_path) << doc.dump(2) << "\n";

  std::printf("elementwise_large_f32: %lld f32 elements, %s, worker blocks %u\n", n,
              runtime->device_name().c_str(), runtime->stats().worker_blocks);
  std::printf("%-16s %7s %10s %10s %10s %9s %8s\n", "variant", "tiles|bk", "median_us", "p10_us",
              "p90_us", "GB/s", "of_copy");
  for (auto& [name, s] : samples) {
    const Variant& v = variants[name];
    const double g = gbps(name, s.Percentile(0.5));
    std::printf("%-16s %7u %10.1f %10.1f %10.1f %9.1f %7.1f%%%s%s\n", name.c_str(),
                v.gpuos ? v.tiles : v.blocks, s.Percentile(0.5), s.Percentile(0.1),
                s.Percentile(0.9), g, 100 * g / copy_gbps, v.diagnostic ? "  (diagnostic)" : "",
                correct[name] ? "" : "  WRONG RESULTS");
  }
  std::printf("gpuos / copy bandwidth = %.3f (target 0.85); floor %.1f us, gpuos %.2fx floor\n",
              ours / copy_gbps, floor_us, samples["gpuos"].Percentile(0.5) / floor_us);
  (void)d->cuStreamDestroy(stream);
  (void)d->cuModuleUnload(module);
  for (const DeviceBuffer& buffer : launch_buffers) runtime->Free(buffer);
  bool all_correct = true;
  for (auto& [name, ok] : correct) all_correct = all_correct && ok;
  return all_correct ? 0 : 1;
}

}  // namespace
}  // namespace gpuos::runtime

int main(int argc, char** argv) { return gpuos::runtime::Main(argc, argv); }
