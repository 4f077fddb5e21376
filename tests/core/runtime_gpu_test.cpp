// The persistent-kernel runtime on a GPU: long chains, fan-out/fan-in,
// backpressure, direct tiles, errors (parking: runtime_park_gpu_test.cpp).
// Every output is poisoned (NaN) first and checked against the CPU. Skips
// with the reason where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "gpuos/cuda_driver.h"
#include "gpuos/registry/pack_loader.h"
#include "runtime_gpu_fixture.h"
#include "runtime_table_pack.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using testing::AddAddressSum;
using testing::DeviceTensor;
using testing::DirectRunsSettled;
using testing::DirectTilesOn;
using testing::Download;
using testing::Filled;
using testing::TablePackConfig;
using testing::U8Entry;
using testing::Upload;

class RuntimeGpuTest : public testing::GpuRuntimeTest {};

std::vector<float> Iota(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 97);
  return v;
}

// 2000 dependent tasks, each split into 3 tiles: buffers ping-pong, each step
// adds alpha * ones. A task that ran before its predecessor would read a
// stale buffer and the sum would be off.
TEST_F(RuntimeGpuTest, ChainOfThousandsOfDependentTasks) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  constexpr std::size_t kN = 20000;
  constexpr int kSteps = 2000;
  auto x = Upload(*runtime, Iota(kN, 0.5f));
  auto y = Upload(*runtime, Filled(kN, NAN));
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  ASSERT_TRUE(x.ok() && y.ok() && ones.ok());
  TaskGraph graph(*runtime);
  DeviceTensor* bufs[2] = {&*x, &*y};
  double expected_increment = 0;
  for (int i = 0; i < kSteps; ++i) {
    const int alpha = 1 + i % 3;
    expected_increment += alpha;
    std::vector<TaskId> deps;
    if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
    auto id =
        graph.Add("add", DType::kF32, {bufs[i % 2]->desc, ones->desc, bufs[(i + 1) % 2]->desc},
                  {{"alpha", std::to_string(alpha)}}, deps);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
  }
  EXPECT_EQ(graph.tasks()[0].num_tiles, 3u);
  auto future = runtime->Submit(graph);
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  ASSERT_TRUE(future->Wait(std::chrono::seconds(30)).ok());
  auto out = Download(*runtime, *bufs[kSteps % 2]);
  ASSERT_TRUE(out.ok());
  const std::vector<float> start = Iota(kN, 0.5f);
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_FLOAT_EQ((*out)[i], static_cast<float>(start[i] + expected_increment)) << "at " << i;
  }
  ASSERT_TRUE(runtime->WaitUntilParked().ok());  // parking flushes the tile counts
  const RuntimeStats stats = runtime->stats();
  EXPECT_FALSE(stats.device_memory_results);  // the system-scope fence by default
  EXPECT_EQ(stats.tasks_per_operator.at("add f32"), static_cast<std::uint64_t>(kSteps));
  EXPECT_GE(stats.tiles_completed, static_cast<std::uint64_t>(kSteps) * 3);
}

// root -> 16 branches (a + k) -> pairwise tree of adds -> one output.
TEST_F(RuntimeGpuTest, FanOutFanIn) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  constexpr std::size_t kN = 4096;
  constexpr int kBranches = 16;
  auto x = Upload(*runtime, Iota(kN, 1.0f));
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  auto a = Upload(*runtime, Filled(kN, NAN));
  ASSERT_TRUE(x.ok() && ones.ok() && a.ok());
  std::vector<DeviceTensor> level;
  for (int k = 0; k < kBranches; ++k) {
    auto b = Upload(*runtime, Filled(kN, NAN));
    ASSERT_TRUE(b.ok());
    level.push_back(*b);
  }
  TaskGraph graph(*runtime);
  auto root = graph.Add("add", DType::kF32, {x->desc, x->desc, a->desc});  // a = 2x
  ASSERT_TRUE(root.ok());
  std::vector<TaskId> ids;
  for (int k = 0; k < kBranches; ++k) {
    auto id = graph.Add("add", DType::kF32, {a->desc, ones->desc, level[k].desc},
                        {{"alpha", std::to_string(k)}}, {*root});
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  // In place: level[i] += level[i + width].
  for (int width = kBranches / 2; width >= 1; width /= 2) {
    std::vector<TaskId> next;
    for (int i = 0; i < width; ++i) {
      auto id = graph.Add("add", DType::kF32, {level[i].desc, level[i + width].desc, level[i].desc},
                          {}, {ids[i], ids[i + width]});
      ASSERT_TRUE(id.ok());
      next.push_back(*id);
    }
    ids = next;
  }
  auto future = runtime->Submit(graph);
  ASSERT_TRUE(future.ok());
  ASSERT_TRUE(future->Wait(std::chrono::seconds(10)).ok());
  auto out = Download(*runtime, level[0]);
  ASSERT_TRUE(out.ok());
  const std::vector<float> xs = Iota(kN, 1.0f);
  for (std::size_t i = 0; i < kN; ++i) {
    const double expected = kBranches * 2.0 * xs[i] + kBranches * (kBranches - 1) / 2.0;
    ASSERT_NEAR((*out)[i], expected, 1e-3 * std::abs(expected)) << "at " << i;
  }
}

// Runs `rounds` graphs of `tasks` independent tiled adds of n elements each
// (round 0: out_k = x + k * ones; then in place: out_k += (round + k) * ones),
// waiting for each graph before submitting the next, so every graph reuses
// the arena entries of the one before; then checks every element.
void RunRoundsOfTiledAdds(Runtime& runtime, std::size_t n, int tasks, int rounds,
                          unsigned int min_tiles) {
  auto x = Upload(runtime, Iota(n, 1.0f));
  auto ones = Upload(runtime, Filled(n, 1.0f));
  ASSERT_TRUE(x.ok() && ones.ok());
  std::vector<DeviceTensor> outs;
  for (int k = 0; k < tasks; ++k) {
    auto out = Upload(runtime, Filled(n, NAN));
    ASSERT_TRUE(out.ok());
    outs.push_back(*out);
  }
  for (int round = 0; round < rounds; ++round) {
    TaskGraph graph(runtime);
    for (int k = 0; k < tasks; ++k) {
      const DeviceTensor& in = round == 0 ? *x : outs[k];
      auto id = graph.Add("add", DType::kF32, {in.desc, ones->desc, outs[k].desc},
                          {{"alpha", std::to_string(round + k)}});
      ASSERT_TRUE(id.ok()) << id.status().ToString();
    }
    ASSERT_GE(graph.tasks()[0].num_tiles, min_tiles);
    auto future = runtime.Submit(graph);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    ASSERT_TRUE(future->Wait(std::chrono::seconds(30)).ok()) << "round " << round;
  }
  const std::vector<float> xs = Iota(n, 1.0f);
  for (int k = 0; k < tasks; ++k) {
    auto out = Download(runtime, outs[k]);
    ASSERT_TRUE(out.ok());
    // sum over rounds of (round + k)
    const double added = rounds * (rounds - 1) / 2.0 + static_cast<double>(rounds) * k;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ((*out)[i], static_cast<float>(xs[i] + added)) << "task " << k << " at " << i;
    }
  }
}

// The worker keeps a block on every SM, so the registers it leaves are all
// that other kernels get while it runs; a stream that a gated graph waits
// for must fit beside it (device/abi.h, kWorkerMaxRegisters). Uncapped, the
// linked worker took 254 registers and the gated-graph tests of
// runtime_streams_gpu_test hung.
TEST_F(RuntimeGpuTest, WorkerLeavesRegistersForOtherKernels) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  const RuntimeStats stats = runtime->stats();
  ASSERT_GT(stats.worker_registers, 0u);
  EXPECT_LE(stats.worker_registers, device::kWorkerMaxRegisters);
  // An SM has 65536 registers (sm_70 to sm_90), allocated per warp in units of 256.
  const unsigned int per_warp = (stats.worker_registers * 32 + 255) / 256 * 256;
  const unsigned int left = 65536 - per_warp * (device::kWorkerThreads / 32);
  EXPECT_GE(left, 256u * 40u) << "a 256-thread block of 40 registers must fit beside the worker";
}

// The context's per-thread stack covers the worker's local memory from Open
// on (RuntimeImpl::ReserveWorkerStack): had the driver to grow it at the
// worker's first launch, that launch would wait for every stream to go idle,
// and a Submit ordered after a stream held back by the host would never
// return (runtime_streams_gpu_test hung so at 48af683: the worker's 1032
// bytes against the default 1024). The limit never shrinks, so this checks
// the reservation only in a process whose worker never launched before the
// check: ctest runs each test in a process of its own.
TEST_F(RuntimeGpuTest, WorkerStackIsReservedAtOpen) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  const RuntimeStats stats = runtime->stats();
  auto driver = LoadCudaDriver();
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  std::size_t stack_bytes = 0;
  ASSERT_EQ((*driver)->cuCtxGetLimit(&stack_bytes, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
  EXPECT_LE(stats.worker_local_bytes, stack_bytes);
}

// 32 independent tiled adds at once, 40 times: more tiled tasks announce
// helpers than the help board has words (QueueDeviceState::help_board), so
// some helpers go through the ready ring, and each submission reuses the
// arena entries of the one before while stale board words may still name
// them. Every tile must run exactly once: an output computed twice or not at
// all, or a submission that never completes (a ticket counted wrong), fails.
TEST_F(RuntimeGpuTest, ManyTiledTasksAtOnceShareTheHelpBoard) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  RunRoundsOfTiledAdds(*runtime, 20000, 32, 40, 2);
}

// Two blocks and tasks of eight tiles: each block claims tile after tile of
// the same task, and every round reuses the previous round's arena entries
// with a new alpha. A block must not claim a tile of the next round's task
// through its stale copy of the old descriptor: it claims its next tile
// before counting the previous one done (RunChain). Before that, one
// racecheck run of the test above saw an element one add short (the
// previous round's alpha).
TEST_F(RuntimeGpuTest, ReclaimedTilesStayInTheirSubmission) {
  RuntimeConfig config;
  config.blocks = 2;
  OPEN_OR_SKIP(runtime, Open(config));
  RunRoundsOfTiledAdds(*runtime, 65536, 8, 400, 8);
}

// Submissions of a single tiled task run as direct tiles (queue_direct.cuh:
// tiles claimed from the slot's claim word, counted in DirectSlot::done);
// built with GPUOS_DIRECT_TILES=0 they count in `remaining` one by one
// (queue.h, SubmissionCountsTiles) and helpers join through the help board.
// With two blocks each runs tile after tile; with every block, helpers join. A miscounted
// submission either never finishes (Wait times out: a `remaining` one short did, in a mutation
// recorded in bench/results/experiments/gpu_checks_session20.txt) or finishes before its last tile,
// letting the next round's in-place add of the same elements overlap it (short sums). One graph at
// a time: the help board never fills here, so helpers that go through the ready ring are not
// covered for a lone task.
TEST_F(RuntimeGpuTest, LoneTiledTaskFinishesWithItsLastTile) {
  RuntimeConfig two_blocks;
  two_blocks.blocks = 2;
  for (const RuntimeConfig& config : {two_blocks, RuntimeConfig{}}) {
    OPEN_OR_SKIP(runtime, Open(config));
    RunRoundsOfTiledAdds(*runtime, 65536, 1, 300, 8);
    // One graph at a time: each runs directly, announced by the host's hint
    // or, where the claiming poller read an older hint, by its record (37-48%
    // of them before AnnounceDirectFromRecord). The device mirrors the count
    // just after each completion, so the last one may land after the wait.
    if (DirectTilesOn()) {
      EXPECT_EQ(DirectRunsSettled(*runtime, 300u), 300u) << config.blocks << " blocks";
    }
  }
}

// RuntimeConfig::pollers: one poller alone, and more than the default (each
// a block reading the host's tail at full rate), take every submission on
// both paths (direct tiles and a board-path chain), with the count the grid
// got in the stats; more pollers than blocks are capped at the blocks.
TEST_F(RuntimeGpuTest, PollerCountsTakeEverySubmission) {
  for (unsigned int pollers : {1u, 8u, 4096u}) {
    RuntimeConfig config;
    config.pollers = pollers;
    if (pollers == 4096u) config.blocks = 3;
    OPEN_OR_SKIP(runtime, Open(config));
    const RuntimeStats opened = runtime->stats();
    EXPECT_EQ(opened.worker_pollers, std::min(pollers, opened.worker_blocks)) << pollers;
    RunRoundsOfTiledAdds(*runtime, 65536, 1, 100, 8);
    RunRoundsOfTiledAdds(*runtime, 20000, 32, 20, 2);
  }
}

// RuntimeConfig::device_memory_results (docs/runtime.md, "The completion's
// fence"): completion words after a gpu-scope fence, on the direct path
// (one tiled task a graph), the board path (32 tasks a graph) and a chain of
// dependent tasks, each round adding to the previous round's outputs. The
// copies read back after the last Future (the copy engine, not the worker)
// must show every round's addition. The race the system fence guarded
// against cannot be forced from here: this checks that every path stays
// right without it.
TEST_F(RuntimeGpuTest, GpuScopeCompletionsKeepEveryResult) {
  RuntimeConfig config;
  config.device_memory_results = true;
  OPEN_OR_SKIP(runtime, Open(config));
  EXPECT_TRUE(runtime->stats().device_memory_results);
  RunRoundsOfTiledAdds(*runtime, 65536, 1, 200, 8);
  RunRoundsOfTiledAdds(*runtime, 20000, 32, 40, 2);
  constexpr std::size_t kN = 4096;
  auto x = Upload(*runtime, Filled(kN, 0.0f));
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  ASSERT_TRUE(x.ok() && ones.ok());
  for (int round = 0; round < 100; ++round) {
    TaskGraph graph(*runtime);
    for (int i = 0; i < 10; ++i) {
      std::vector<TaskId> deps;
      if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
      auto id = graph.Add("add", DType::kF32, {x->desc, ones->desc, x->desc}, {}, deps);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
    }
    auto future = runtime->Submit(graph);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    ASSERT_TRUE(future->Wait(std::chrono::seconds(30)).ok()) << "round " << round;
  }
  auto out = Download(*runtime, *x);
  ASSERT_TRUE(out.ok());
  for (std::size_t i = 0; i < kN; ++i) ASSERT_FLOAT_EQ((*out)[i], 1000.0f) << "at " << i;
}

// Lone tiled tasks run as direct tiles (docs/runtime.md, "Direct tiles"):
// helpers wait for the slot's claim word to open, read the graph from the
// slot's device area and claim tiles from the word. Here 400 of them are in
// flight together over 2 ring slots, so slots are reused while helpers of
// the previous submission in them may still be on their way (claims that
// find the word not opened yet, or opened for a later submission), and the
// pollers' board names each submission only until the next claim (with a
// backlog, older ones take the board path: both paths are mixed here). Each
// adds in place to its own output, so a tile run under the wrong
// submission, twice or never leaves a wrong value, and a miscounted
// submission never completes (or completes early and is checked before its
// last tile).
TEST_F(RuntimeGpuTest, LoneTiledTasksInFlightTogetherOverTwoSlots) {
  RuntimeConfig config;
  config.submission_capacity = 2;
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr int kGraphs = 400;
  constexpr std::size_t kN = 65536;
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  ASSERT_TRUE(ones.ok());
  std::vector<DeviceTensor> outs;
  for (int g = 0; g < kGraphs; ++g) {
    auto out = Upload(*runtime, Iota(kN, 1.0f));
    ASSERT_TRUE(out.ok());
    outs.push_back(*out);
  }
  std::vector<Future> futures;
  for (int g = 0; g < kGraphs; ++g) {
    TaskGraph graph(*runtime);
    ASSERT_TRUE(graph
                    .Add("add", DType::kF32, {outs[g].desc, ones->desc, outs[g].desc},
                         {{"alpha", std::to_string(g + 1)}})
                    .ok());
    ASSERT_GE(graph.tasks()[0].num_tiles, 8u);
    auto future = runtime->Submit(graph);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    futures.push_back(*future);
  }
  const std::vector<float> xs = Iota(kN, 1.0f);
  for (int g = 0; g < kGraphs; ++g) {
    ASSERT_TRUE(futures[g].Wait(std::chrono::seconds(30)).ok()) << "graph " << g;
    auto out = Download(*runtime, outs[g]);
    ASSERT_TRUE(out.ok());
    for (std::size_t i = 0; i < kN; ++i) {
      ASSERT_FLOAT_EQ((*out)[i], xs[i] + static_cast<float>(g + 1)) << "graph " << g << " at " << i;
    }
  }
  const RuntimeStats stats = runtime->stats();
  EXPECT_GT(stats.backpressure_waits, 0u);
  if (DirectTilesOn()) {
    EXPECT_GT(stats.direct_submissions, 0u) << "no submission ran directly";
  }
}

// The payload cache (docs/runtime.md, "Direct tiles", "Cached payloads"):
// 400 in-place adds cycling over 4 outputs, two in flight at a time over 2
// ring slots, so four payloads recur: each fills a cache entry once, then
// runs from it without its ring slot being read, while slots are reused
// under helpers on their way (a slot's claim word opens cache areas, and its
// own area where a payload's fill is not confirmed yet). An add run from a
// wrong area, twice or never leaves a wrong sum.
TEST_F(RuntimeGpuTest, RecurringLoneTiledTasksRunFromThePayloadCache) {
  RuntimeConfig config;
  config.submission_capacity = 2;
  config.payload_cache_entries = 8;  // off by default
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr int kGraphs = 400;
  constexpr int kOutputs = 4;
  constexpr std::size_t kN = 65536;
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  ASSERT_TRUE(ones.ok());
  std::vector<DeviceTensor> outs;
  for (int o = 0; o < kOutputs; ++o) {
    auto out = Upload(*runtime, Iota(kN, 1.0f));
    ASSERT_TRUE(out.ok());
    outs.push_back(*out);
  }
  std::vector<Future> futures;
  for (int g = 0; g < kGraphs; ++g) {
    TaskGraph graph(*runtime);
    const DeviceTensor& out = outs[g % kOutputs];
    ASSERT_TRUE(graph.Add("add", DType::kF32, {out.desc, ones->desc, out.desc}).ok());
    ASSERT_GE(graph.tasks()[0].num_tiles, 8u);
    auto future = runtime->Submit(graph);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    futures.push_back(*future);
  }
  for (int g = 0; g < kGraphs; ++g) {
    ASSERT_TRUE(futures[g].Wait(std::chrono::seconds(30)).ok()) << "graph " << g;
  }
  const std::vector<float> xs = Iota(kN, 1.0f);
  for (int o = 0; o < kOutputs; ++o) {
    auto out = Download(*runtime, outs[o]);
    ASSERT_TRUE(out.ok());
    for (std::size_t i = 0; i < kN; ++i) {
      ASSERT_FLOAT_EQ((*out)[i], xs[i] + kGraphs / kOutputs) << "output " << o << " at " << i;
    }
  }
  const RuntimeStats stats = runtime->stats();
  EXPECT_EQ(stats.payload_cache_entries, config.payload_cache_entries);
  EXPECT_GE(stats.payload_cache_fills, static_cast<std::uint64_t>(kOutputs));
  EXPECT_GT(stats.payload_cache_uses, static_cast<std::uint64_t>(kGraphs / 2));
  if (DirectTilesOn()) {
    DirectRunsSettled(*runtime, kGraphs);
    EXPECT_GT(runtime->stats().cached_openings, 0u) << "no submission opened from the cache";
    EXPECT_LE(runtime->stats().cached_openings, runtime->stats().payload_cache_uses);
  }
}

// A use of the payload cache behind a gate (SubmitOptions::open_later, the
// PyTorch frontend's stream ordering): its hint opens with OpenGate, and
// DropGated completes it without running it. One call at a time, so every
// call after the first fill is a use.
TEST_F(RuntimeGpuTest, GatedUsesOfThePayloadCacheOpenAndDrop) {
  RuntimeConfig config;
  config.payload_cache_entries = 4;  // off by default
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr std::size_t kN = 65536;
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  auto out = Upload(*runtime, Iota(kN, 1.0f));
  ASSERT_TRUE(ones.ok() && out.ok());
  TaskGraph graph(*runtime);
  ASSERT_TRUE(graph.Add("add", DType::kF32, {out->desc, ones->desc, out->desc}).ok());
  ASSERT_GE(graph.tasks()[0].num_tiles, 8u);
  // Two tasks: never a lone tiled one, never cached.
  auto side = Upload(*runtime, Filled(16, 0.0f));
  ASSERT_TRUE(side.ok());
  TaskGraph other(*runtime);
  ASSERT_TRUE(other.Add("add", DType::kF32, {side->desc, side->desc, side->desc}).ok());
  ASSERT_TRUE(other.Add("add", DType::kF32, {side->desc, side->desc, side->desc}).ok());
  int others = 0;
  constexpr int kCalls = 60;
  int ran = 0;
  for (int c = 0; c < kCalls; ++c) {
    const bool gated = c % 2 == 1;
    const bool drop = c % 6 == 5;
    auto future = runtime->Submit(graph, SubmitOptions{.open_later = gated});
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    if (gated) {
      // Let the pollers see the closed hint first, now and then.
      if (c % 4 == 1) std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (c % 12 == 7) {
        // A later submission that is not a lone tiled task runs while this
        // one waits for its gate (the hint no longer names it cached).
        auto later = runtime->Submit(other);
        ASSERT_TRUE(later.ok()) << later.status().ToString();
        ASSERT_TRUE(later->Wait(std::chrono::seconds(30)).ok()) << "call " << c;
        ++others;
      }
      ASSERT_TRUE((drop ? runtime->DropGated(*future) : runtime->OpenGate(*future)).ok());
    }
    ASSERT_TRUE(future->Wait(std::chrono::seconds(30)).ok()) << "call " << c;
    if (!drop) ++ran;
  }
  auto result = Download(*runtime, *out);
  ASSERT_TRUE(result.ok());
  const std::vector<float> xs = Iota(kN, 1.0f);
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_FLOAT_EQ((*result)[i], xs[i] + static_cast<float>(ran)) << "at " << i;
  }
  EXPECT_GT(others, 0);
  const RuntimeStats stats = runtime->stats();
  EXPECT_GE(stats.payload_cache_uses, static_cast<std::uint64_t>(kCalls - 2));
  if (DirectTilesOn()) {
    DirectRunsSettled(*runtime, static_cast<std::uint64_t>(ran - others));
    // Less the uses a later submission sent to their slot (c % 12 == 7).
    EXPECT_GE(runtime->stats().cached_openings, static_cast<std::uint64_t>(ran - 2 - others))
        << "uses claimed through their ring slot instead of the cache";
  }
}

// A queue of 64 tasks and 4 submissions: 300 graphs of 8 in-place steps each
// must all run, with Submit waiting for room instead of overwriting.
TEST_F(RuntimeGpuTest, QueueFullBackpressure) {
  RuntimeConfig config;
  config.task_capacity = 64;
  config.tensor_capacity = 64;
  config.successor_capacity = 64;
  config.submission_capacity = 4;
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr int kGraphs = 300;
  constexpr int kSteps = 8;
  constexpr std::size_t kN = 256;
  auto ones = Upload(*runtime, Filled(kN, 1.0f));
  ASSERT_TRUE(ones.ok());
  std::vector<DeviceTensor> accumulators;
  std::vector<Future> futures;
  for (int g = 0; g < kGraphs; ++g) {
    auto acc = Upload(*runtime, Filled(kN, static_cast<float>(g)));
    ASSERT_TRUE(acc.ok());
    accumulators.push_back(*acc);
  }
  // Submitted back to back (uploads in between would let the worker keep up).
  for (int g = 0; g < kGraphs; ++g) {
    const DeviceTensor* acc = &accumulators[g];
    TaskGraph graph(*runtime);
    for (int s = 0; s < kSteps; ++s) {
      std::vector<TaskId> deps;
      if (s > 0) deps.push_back(static_cast<TaskId>(s - 1));
      ASSERT_TRUE(graph.Add("add", DType::kF32, {acc->desc, ones->desc, acc->desc}, {}, deps).ok());
    }
    auto future = runtime->Submit(graph);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    futures.push_back(*future);
  }
  for (const Future& f : futures) ASSERT_TRUE(f.Wait(std::chrono::seconds(10)).ok());
  for (int g = 0; g < kGraphs; ++g) {
    auto out = Download(*runtime, accumulators[g]);
    ASSERT_TRUE(out.ok());
    for (float v : *out) ASSERT_EQ(v, static_cast<float>(g + kSteps)) << "graph " << g;
  }
  const RuntimeStats stats = runtime->stats();
  EXPECT_GT(stats.backpressure_waits, 0u);
  EXPECT_LE(stats.max_queue_depth, 4u);
}

// Many independent no-op and tiny tasks in one graph, and a failing task.
TEST_F(RuntimeGpuTest, IndependentTasksAndErrors) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  TaskGraph noops(*runtime);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(noops.AddNoop().ok());
  auto done = runtime->Submit(noops);
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(done->Wait(std::chrono::seconds(10)).ok());

  auto a = Upload(*runtime, Filled(64, 1.0f));
  ASSERT_TRUE(a.ok());
  device::TensorDesc wrong = a->desc;
  wrong.dtype = device::kDTypeF64;  // the f32 instantiation rejects it
  TaskGraph bad(*runtime);
  ASSERT_TRUE(bad.Add("add", DType::kF32, {a->desc, wrong, a->desc}).ok());
  auto failed = runtime->Submit(bad);
  ASSERT_TRUE(failed.ok());
  const Status status = failed->Wait(std::chrono::seconds(10));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find("dtype"), std::string::npos) << status.message();
}

// A task added with AddTableTask reaches every entry of its table through
// OpCall::table, in order, from every tile (the contract of tables of
// descriptors): entries 1..5 hold 1, 2, 4, 8, 16 and tile t writes
// sum(k * entry k) + t into the last entry; entry 0 is the anchor, a u8
// scalar.
TEST_F(RuntimeGpuTest, TableTaskReadsItsWholeTableFromEveryTile) {
  OPEN_OR_SKIP(runtime, OpenConfig(TablePackConfig()));
  std::vector<DeviceTensor> values;
  for (float v : {1.0f, 2.0f, 4.0f, 8.0f, 16.0f}) {
    auto t = Upload(*runtime, {v});
    ASSERT_TRUE(t.ok());
    values.push_back(*t);
  }
  auto out = Upload(*runtime, Filled(4, std::nanf("")));
  ASSERT_TRUE(out.ok());
  std::vector<device::TensorDesc> table = {U8Entry(out->buffer.address)};
  for (const DeviceTensor& v : values) table.push_back(U8Entry(v.buffer.address));
  table.push_back(U8Entry(out->buffer.address));
  TaskGraph graph(*runtime);
  TaskOptions options;
  options.work_items = 4;
  options.tiles = 4;
  ASSERT_TRUE(
      graph.AddTableTask("table_sum", DType::kU8, table, {{"count", "7"}}, {}, options).ok());
  EXPECT_EQ(graph.tensors().size(), table.size());  // its own entries, in order
  for (std::size_t k = 0; k < table.size(); ++k) {
    EXPECT_EQ(graph.tensors()[k].data, table[k].data) << k;
  }
  auto done = runtime->Submit(graph);
  ASSERT_TRUE(done.ok());
  ASSERT_OK(done->Wait(std::chrono::seconds(10)));
  auto got = Download(*runtime, *out);
  ASSERT_TRUE(got.ok());
  const float sum = 1 * 1.0f + 2 * 2.0f + 3 * 4.0f + 4 * 8.0f + 5 * 16.0f;  // 129
  EXPECT_EQ(*got, (std::vector<float>{sum, sum + 1, sum + 2, sum + 3}));
}

// A task added with AddAddressTableTask reaches its first descriptor through
// OpCall::table and address k of its table as word k of the records after
// it, across a record boundary (20 addresses a record), from every tile;
// SetAddressWord rebinds one address in the second record. Tile t writes
// sum(k * value at address k) + t into the first descriptor's buffer.
TEST_F(RuntimeGpuTest, AddressTableTaskReadsEveryAddressFromEveryTile) {
  OPEN_OR_SKIP(runtime, OpenConfig(TablePackConfig()));
  constexpr std::size_t kCount = 25;  // two records: 20 + 5
  std::vector<float> values(kCount + 1);
  for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(k % 7 + 1);
  auto held = Upload(*runtime, values);
  ASSERT_TRUE(held.ok());
  auto out = Upload(*runtime, Filled(3, std::nanf("")));
  ASSERT_TRUE(out.ok());
  TaskGraph graph(*runtime);
  ASSERT_OK(AddAddressSum(graph, *out, *held, kCount, 3));
  ASSERT_EQ(graph.tensors().size(), 3u);  // the descriptor, then two records
  EXPECT_EQ(graph.tensors()[0].data, out->buffer.address);
  const auto expected = [&](std::size_t rebound, float value) {
    float sum = 0;
    for (std::size_t k = 0; k < kCount; ++k) {
      sum += static_cast<float>(k) * (k == rebound ? value : values[k]);
    }
    return std::vector<float>{sum, sum + 1, sum + 2};
  };
  auto done = runtime->Submit(graph);
  ASSERT_TRUE(done.ok());
  ASSERT_OK(done->Wait(std::chrono::seconds(10)));
  auto got = Download(*runtime, *out);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, expected(kCount, 0));
  // Address 21 is word 1 of the second record: point it at the last value.
  ASSERT_OK(graph.SetAddressWord(2, 1, held->buffer.address + 4 * kCount));
  done = runtime->Submit(graph);
  ASSERT_TRUE(done.ok());
  ASSERT_OK(done->Wait(std::chrono::seconds(10)));
  got = Download(*runtime, *out);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, expected(21, values[kCount]));
  EXPECT_EQ(graph.SetAddressWord(3, 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(graph.SetAddressWord(1, TaskGraph::kAddressesPerRecord, 0).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuos::runtime

namespace gpuos::runtime {
namespace {

// Regression: Runtime::Open dereferenced a null FindLatest() for operators
// with a second type variable (cast), so any image holding std.layout crashed.
TEST(RuntimeSecondTypeVariableTest, CastResolvesPerTypePairAndRuns) {
  auto layout =
      registry::LoadPackFile(std::string(GPUOS_SOURCE_DIR) + "/operators/std_layout.yaml");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  RuntimeConfig config;
  for (const auto& spec : layout->operators) {
    if (spec.name == "cast") config.operators.push_back(spec);
  }
  ASSERT_EQ(config.operators.size(), 1u);
  config.repository_path = std::string(GPUOS_BINARY_DIR) + "/runtime_test_cache.db";
  auto runtime = Runtime::Open(config);
  if (!runtime.ok() && runtime.status().code() == StatusCode::kUnavailable &&
      runtime.status().message().rfind("no CUDA", 0) == 0) {
    GTEST_SKIP() << runtime.status().message();
  }
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  Runtime& rt = **runtime;

  auto unpaired = rt.Resolve("cast", DType::kF32);
  ASSERT_FALSE(unpaired.ok());
  EXPECT_NE(unpaired.status().message().find("f32->i64"), std::string::npos)
      << unpaired.status().message();
  auto to_i64 = rt.Resolve("cast", DType::kF32, DType::kI64);
  auto to_i32 = rt.Resolve("cast", DType::kF32, DType::kI32);
  ASSERT_TRUE(to_i64.ok() && to_i32.ok());
  EXPECT_NE(to_i64->slot, to_i32->slot);
  EXPECT_NE(to_i64->logical, to_i32->logical);

  constexpr long long kN = 1000;
  std::vector<float> values(kN);
  for (long long i = 0; i < kN; ++i) values[i] = static_cast<float>(i - 500) + 0.75f;
  auto input = testing::Upload(rt, values);
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  auto out = rt.Allocate(kN * sizeof(long long));
  ASSERT_TRUE(out.ok());
  std::vector<unsigned char> poison(kN * sizeof(long long), 0xff);
  ASSERT_TRUE(rt.CopyToDevice(out->address, poison.data(), poison.size()).ok());
  const device::TensorDesc out_desc =
      device::MakeContiguousTensorDesc(out->address, device::kDTypeI64, 1, &kN);
  TaskGraph graph(rt);
  TaskOptions options;
  options.out_dtype = DType::kI64;
  ASSERT_TRUE(graph.Add("cast", DType::kF32, {input->desc, out_desc}, {}, {}, options).ok());
  auto future = rt.Submit(graph);
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  ASSERT_TRUE(future->Wait().ok());
  std::vector<long long> got(kN);
  ASSERT_TRUE(rt.CopyToHost(got.data(), out->address, kN * sizeof(long long)).ok());
  for (long long i = 0; i < kN; ++i) {
    ASSERT_EQ(got[i], static_cast<long long>(values[i])) << "element " << i;  // truncation
  }
}

}  // namespace
}  // namespace gpuos::runtime

namespace gpuos::runtime {
namespace {

// Review finding: Shutdown() freed the completion words that Futures read,
// and Wait()/WaitUntilParked() used the destroyed stream afterwards.
TEST(RuntimeShutdownTest, FuturesAndCallsAfterShutdownAreSafe) {
  std::string skip, error;
  auto rt = testing::OpenTestRuntime({}, &skip, &error);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(rt, nullptr) << error;
  std::vector<float> ones(4096, 1.0f);
  auto a = testing::Upload(*rt, ones);
  auto out = testing::Upload(*rt, ones);
  ASSERT_TRUE(a.ok() && out.ok());
  TaskGraph graph(*rt);
  ASSERT_TRUE(graph.Add("add", DType::kF32, {a->desc, a->desc, out->desc}).ok());
  auto future = rt->Submit(graph);
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  ASSERT_TRUE(rt->Shutdown().ok());
  // The submission finished before Shutdown returned (it synchronizes).
  EXPECT_TRUE(future->Ready());
  EXPECT_TRUE(future->Wait().ok());
  EXPECT_TRUE(rt->WaitUntilParked().ok());
  EXPECT_EQ(rt->Submit(graph).status().code(), StatusCode::kUnavailable);
  std::vector<float> host(4);
  EXPECT_EQ(rt->CopyToHost(host.data(), out->buffer.address, 16).code(), StatusCode::kUnavailable);
  rt->Free(a->buffer);  // a no-op after Shutdown, not a crash
  EXPECT_EQ(rt->Shutdown().code(), StatusCode::kUnavailable);
  EXPECT_GE(rt->stats().submissions, 1u);
}

// A table task run as direct tiles (a lone tiled task) has its table
// staged in the block's shared memory where it fits eight descriptors
// (queue_direct.cuh, StagedTableLength) and read from the slot's area
// otherwise: 140 addresses (the first descriptor and seven records, the
// largest staged table) and 141 (eight records, left in the area) each give
// every tile every address, call after call.
TEST_F(RuntimeGpuTest, AddressTablesOnEitherSideOfTheStagedSizeReachEveryTile) {
  OPEN_OR_SKIP(runtime, OpenConfig(TablePackConfig()));
  for (const std::size_t count : {std::size_t{140}, std::size_t{141}}) {
    std::vector<float> values(count);
    for (std::size_t k = 0; k < count; ++k) values[k] = static_cast<float>(k % 5 + 1);
    auto held = Upload(*runtime, values);
    ASSERT_TRUE(held.ok());
    auto out = Upload(*runtime, Filled(4, std::nanf("")));
    ASSERT_TRUE(out.ok());
    TaskGraph graph(*runtime);
    ASSERT_OK(AddAddressSum(graph, *out, *held, count, 4));
    ASSERT_EQ(graph.tensors().size(),
              1 + (count + TaskGraph::kAddressesPerRecord - 1) / TaskGraph::kAddressesPerRecord);
    float sum = 0;  // whole numbers below 2^24: exact in any order
    for (std::size_t k = 0; k < count; ++k) sum += static_cast<float>(k) * values[k];
    const std::vector<float> poison = Filled(4, std::nanf(""));
    for (int round = 0; round < 20; ++round) {
      ASSERT_TRUE(
          runtime->CopyToDevice(out->buffer.address, poison.data(), poison.size() * sizeof(float))
              .ok());
      auto done = runtime->Submit(graph);
      ASSERT_TRUE(done.ok()) << done.status().ToString();
      ASSERT_OK(done->Wait(std::chrono::seconds(10)));
      auto got = Download(*runtime, *out);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(*got, (std::vector<float>{sum, sum + 1, sum + 2, sum + 3}))
          << count << " addresses, round " << round;
    }
  }
}

}  // namespace
}  // namespace gpuos::runtime
