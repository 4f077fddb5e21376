// The runtime's diagnostics on a GPU (docs/runtime.md, "Errors",
// "Watchdog", "Chrome trace"): errors belong to their own submission and the
// runtime keeps serving; the watchdog names a task that runs too long; the
// trace of a chain has one event per task. Skips where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gpuos/device/queue.h"
#include "gpuos/registry/pack_loader.h"
#include "runtime_gpu_fixture.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using testing::DeviceTensor;
using testing::DirectRunsSettled;
using testing::DirectTilesOn;
using testing::Download;
using testing::Upload;

class RuntimeDiagnosticsTest : public testing::GpuRuntimeTest {
 protected:
  // A runtime over add, mul and this file's test operators.
  std::unique_ptr<Runtime> Open(RuntimeConfig config) {
    return OpenWithSpin(config, "spin", "1.2.0", "runtime_errors_gpu_test.cpp",
                        "runtime_errors_test_cache.db");
  }
};

std::vector<float> Values(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 31);
  return v;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// x + y -> out (poisoned first); the check is done by the caller.
Expected<Future> SubmitAdd(Runtime& runtime, const DeviceTensor& x, const DeviceTensor& y,
                           const DeviceTensor& out) {
  TaskGraph graph(runtime);
  GPUOS_RETURN_IF_ERROR(graph.Add("add", DType::kF32, {x.desc, y.desc, out.desc}).status());
  return runtime.Submit(graph);
}

// Regression (the known defect of commit 17170d1): errors were one record
// per runtime, so a second failing graph reported success and every later
// Synchronize reported the first failure.
TEST_F(RuntimeDiagnosticsTest, ErrorsBelongToTheirSubmissionAndTheRuntimeKeepsServing) {
  OPEN_OR_SKIP(runtime, Open(RuntimeConfig{}));
  constexpr std::size_t kN = 4096;
  auto x = Upload(*runtime, Values(kN, 1.0f));
  auto y = Upload(*runtime, Values(kN, 0.5f));
  auto out = Upload(*runtime, std::vector<float>(kN, NAN));
  ASSERT_TRUE(x.ok() && y.ok() && out.ok());
  const auto add = runtime->Resolve("add", DType::kF32);
  ASSERT_TRUE(add.ok());

  // Task 1 of a 3-task chain passes an f64 descriptor to the f32 add.
  device::TensorDesc wrong = y->desc;
  wrong.dtype = device::kDTypeF64;
  TaskGraph bad(*runtime);
  ASSERT_TRUE(bad.Add("add", DType::kF32, {x->desc, y->desc, out->desc}).ok());
  ASSERT_TRUE(bad.Add("add", DType::kF32, {x->desc, wrong, out->desc}, {}, {0}).ok());
  ASSERT_TRUE(bad.Add("add", DType::kF32, {x->desc, y->desc, out->desc}, {}, {1}).ok());
  auto failed = runtime->Submit(bad);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  const Status status = failed->Wait(std::chrono::seconds(10));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  for (const std::string& part :
       {std::string("submission ") + std::to_string(failed->sequence()), std::string("task 1 "),
        std::string("add f32"), "version " + add->version.ToString(), std::string("dtype"),
        std::string("tensor 1")}) {
    EXPECT_TRUE(Contains(status.message(), part)) << "'" << part << "' in: " << status.message();
  }

  // Later submissions are unaffected and compute the right thing.
  const std::vector<float> xs = Values(kN, 1.0f), ys = Values(kN, 0.5f);
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(runtime
                    ->CopyToDevice(out->buffer.address, std::vector<float>(kN, NAN).data(),
                                   kN * sizeof(float))
                    .ok());
    auto good = SubmitAdd(*runtime, *x, *y, *out);
    ASSERT_TRUE(good.ok()) << good.status().ToString();
    ASSERT_TRUE(good->Wait(std::chrono::seconds(10)).ok()) << "round " << round;
    auto got = Download(*runtime, *out);
    ASSERT_TRUE(got.ok());
    for (std::size_t i = 0; i < kN; ++i) ASSERT_EQ((*got)[i], xs[i] + ys[i]) << "at " << i;
  }

  // A second failure reports its own task and code: ctx.fail(7) in spin.
  DeviceTensor flag = *out;
  TaskGraph failing(*runtime);
  ASSERT_TRUE(failing.Add("spin", DType::kF32, {flag.desc}, {{"fail_code", "7"}}).ok());
  auto second = runtime->Submit(failing);
  ASSERT_TRUE(second.ok());
  const Status second_status = second->Wait(std::chrono::seconds(10));
  EXPECT_EQ(second_status.code(), StatusCode::kFailedPrecondition) << second_status.ToString();
  EXPECT_TRUE(Contains(second_status.message(), "task 0 ")) << second_status.message();
  EXPECT_TRUE(Contains(second_status.message(), "spin f32 version 1.2.0"))
      << second_status.message();
  EXPECT_TRUE(Contains(second_status.message(), "code 7")) << second_status.message();

  // Each Future keeps its own outcome; Synchronize has nothing left to report.
  EXPECT_EQ(failed->Wait().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(second->Wait().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(runtime->Synchronize().ok());
  EXPECT_EQ(runtime->TraceEvents().status().code(), StatusCode::kFailedPrecondition);
}

// With 4 submission slots, failing and good graphs alternate without
// waiting, so slots are reused before anyone waits: each Future must still
// report its own outcome (failures are kept when their slot is reclaimed).
TEST_F(RuntimeDiagnosticsTest, FailuresSurviveTheReuseOfTheirSlot) {
  RuntimeConfig config;
  config.submission_capacity = 4;
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr std::size_t kN = 256;
  constexpr int kGraphs = 24;
  auto x = Upload(*runtime, Values(kN, 1.0f));
  ASSERT_TRUE(x.ok());
  std::vector<DeviceTensor> outs;
  for (int g = 0; g < kGraphs; ++g) {
    auto out = Upload(*runtime, std::vector<float>(kN, NAN));
    ASSERT_TRUE(out.ok());
    outs.push_back(*out);
  }
  std::vector<Future> futures;
  for (int g = 0; g < kGraphs; ++g) {
    TaskGraph graph(*runtime);
    // Graph g has g % 3 + 1 tasks; in odd graphs the last one fails with code g.
    const int tasks = g % 3 + 1;
    for (int t = 0; t < tasks; ++t) {
      std::vector<TaskId> deps;
      if (t > 0) deps.push_back(static_cast<TaskId>(t - 1));
      if (g % 2 == 1 && t == tasks - 1) {
        ASSERT_TRUE(graph
                        .Add("spin", DType::kF32, {outs[g].desc},
                             {{"fail_code", std::to_string(100 + g)}}, deps)
                        .ok());
      } else {
        ASSERT_TRUE(graph.Add("add", DType::kF32, {x->desc, x->desc, outs[g].desc}, {}, deps).ok());
      }
    }
    auto future = runtime->Submit(graph);
    ASSERT_TRUE(future.ok()) << future.status().ToString();
    futures.push_back(*future);
  }
  const std::vector<float> xs = Values(kN, 1.0f);
  for (int g = 0; g < kGraphs; ++g) {
    const Status status = futures[g].Wait(std::chrono::seconds(10));
    if (g % 2 == 0) {
      EXPECT_TRUE(status.ok()) << "graph " << g << ": " << status.ToString();
      auto got = Download(*runtime, outs[g]);
      ASSERT_TRUE(got.ok());
      for (std::size_t i = 0; i < kN; ++i) ASSERT_EQ((*got)[i], 2 * xs[i]) << "graph " << g;
    } else {
      EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << "graph " << g;
      const std::string task = "task " + std::to_string(g % 3) + " ";
      EXPECT_TRUE(Contains(status.message(), task)) << task << " in: " << status.message();
      EXPECT_TRUE(Contains(status.message(), "code " + std::to_string(100 + g)))
          << status.message();
    }
  }
  EXPECT_TRUE(runtime->Synchronize().ok());
}

// A lone tiled task that fails in every tile, with completions after a
// gpu-scope fence (RuntimeConfig::device_memory_results, as the PyTorch
// frontend runs): it runs as direct tiles, whose last count is an
// acquire-release add after which the completion has no fence of its own
// (queue_direct.cuh, CountDirectTile), so the error records that the other
// tiles wrote reach the completing block through the counts alone. Each
// failure reports its own code; a good submission of the same task between
// two failures completes with its results.
TEST_F(RuntimeDiagnosticsTest, ErrorsOfDirectTilesReachGpuScopeCompletions) {
  RuntimeConfig config;
  config.device_memory_results = true;
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr std::size_t kN = 1 << 16;
  auto out = Upload(*runtime, std::vector<float>(kN, NAN));
  ASSERT_TRUE(out.ok());
  TaskOptions tiled;
  tiled.tiles = 32;
  const std::uint64_t direct_before = runtime->stats().direct_submissions;
  constexpr int kRounds = 50;
  for (int round = 0; round < kRounds; ++round) {
    const std::string code = std::to_string(200 + round);
    TaskGraph failing(*runtime);
    ASSERT_TRUE(
        failing.Add("spin", DType::kF32, {out->desc}, {{"fail_code", code}}, {}, tiled).ok());
    auto failed = runtime->Submit(failing);
    ASSERT_TRUE(failed.ok()) << failed.status().ToString();
    const Status status = failed->Wait(std::chrono::seconds(10));
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition)
        << "round " << round << ": " << status.ToString();
    EXPECT_TRUE(Contains(status.message(), "code " + code)) << status.message();

    TaskGraph good(*runtime);
    ASSERT_TRUE(
        good.Add("spin", DType::kF32, {out->desc}, {{"value", std::to_string(round)}}, {}, tiled)
            .ok());
    auto done = runtime->Submit(good);
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    ASSERT_TRUE(done->Wait(std::chrono::seconds(10)).ok()) << "round " << round;
  }
  auto got = Download(*runtime, *out);
  ASSERT_TRUE(got.ok());
  for (std::size_t i = 0; i < kN; ++i) {
    ASSERT_EQ((*got)[i], static_cast<float>(kRounds - 1)) << "at " << i;
  }
  // Every one of them, failing or not, ran as direct tiles (each a lone
  // tiled task submitted alone), unless the image was built without them.
  if (DirectTilesOn()) {
    const std::uint64_t expected = direct_before + 2 * kRounds;
    EXPECT_EQ(DirectRunsSettled(*runtime, expected), expected);
  }
}

TEST_F(RuntimeDiagnosticsTest, WatchdogNamesATaskOverTheLimitAndTheRuntimeKeepsServing) {
  std::mutex log_mutex;
  std::vector<std::string> log;
  RuntimeConfig config;
  config.task_time_limit = std::chrono::milliseconds(200);
  config.watchdog_log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    log.push_back(line);
  };
  OPEN_OR_SKIP(runtime, Open(config));
  auto flag = Upload(*runtime, std::vector<float>(64, 0.0f));
  ASSERT_TRUE(flag.ok());

  // Under the limit: no report.
  TaskGraph short_spin(*runtime);
  ASSERT_TRUE(short_spin.Add("spin", DType::kF32, {flag->desc}, {{"spin_ns", "50000000"}}).ok());
  auto quick = runtime->Submit(short_spin);
  ASSERT_TRUE(quick.ok());
  ASSERT_TRUE(quick->Wait(std::chrono::seconds(10)).ok());
  EXPECT_EQ(runtime->stats().watchdog_reports, 0u);

  // Task 1 of the graph spins for 1.5 s (7.5 times the limit).
  TaskGraph long_spin(*runtime);
  ASSERT_TRUE(long_spin.AddNoop().ok());
  ASSERT_TRUE(
      long_spin.Add("spin", DType::kF32, {flag->desc}, {{"spin_ns", "1500000000"}}, {0}).ok());
  const Clock::time_point start = Clock::now();
  auto slow = runtime->Submit(long_spin);
  ASSERT_TRUE(slow.ok());
  const Status report = slow->Wait(std::chrono::seconds(20));
  const double waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(report.code(), StatusCode::kUnavailable) << report.ToString();
  for (const std::string& part :
       {std::string("watchdog"), "task 1 of submission " + std::to_string(slow->sequence()),
        std::string("spin f32 version 1.2.0"), std::string("worker block"),
        std::string("for at least")}) {
    EXPECT_TRUE(Contains(report.message(), part)) << "'" << part << "' in: " << report.message();
  }
  EXPECT_LT(waited_s, 1.4) << "reported only after the task ended: " << report.message();
  EXPECT_GE(waited_s, 0.2);
  EXPECT_EQ(runtime->stats().watchdog_reports, 1u);
  {
    std::lock_guard<std::mutex> lock(log_mutex);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_TRUE(Contains(log[0], "spin f32")) << log[0];
  }

  // Later Waits report it again (at most once per limit each) until the
  // task finishes; the runtime still serves.
  Status again;
  int repeats = 0;
  while ((again = slow->Wait(std::chrono::seconds(20))).code() == StatusCode::kUnavailable &&
         Contains(again.message(), "watchdog") && ++repeats < 20) {
  }
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_LE(repeats, 7);
  auto got = Download(*runtime, *flag);
  ASSERT_TRUE(got.ok());
  for (float v : *got) ASSERT_EQ(v, 1.0f);
  auto x = Upload(*runtime, Values(512, 1.0f));
  auto out = Upload(*runtime, std::vector<float>(512, NAN));
  ASSERT_TRUE(x.ok() && out.ok());
  auto after = SubmitAdd(*runtime, *x, *x, *out);
  ASSERT_TRUE(after.ok());
  ASSERT_TRUE(after->Wait(std::chrono::seconds(10)).ok());
  auto sum = Download(*runtime, *out);
  ASSERT_TRUE(sum.ok());
  const std::vector<float> xs = Values(512, 1.0f);
  for (std::size_t i = 0; i < xs.size(); ++i) ASSERT_EQ((*sum)[i], 2 * xs[i]);
  EXPECT_EQ(runtime->stats().watchdog_reports, 1u);  // reported once
}

TEST_F(RuntimeDiagnosticsTest, TraceOfAChainHasOneEventPerTaskInOrder) {
  RuntimeConfig config;
  config.trace_capacity = 1u << 14;
  OPEN_OR_SKIP(runtime, Open(config));
  constexpr std::size_t kN = 1024;
  constexpr int kSteps = 64;
  auto acc = Upload(*runtime, std::vector<float>(kN, 0.0f));
  auto ones = Upload(*runtime, std::vector<float>(kN, 1.0f));
  ASSERT_TRUE(acc.ok() && ones.ok());
  TaskGraph chain(*runtime);
  for (int i = 0; i < kSteps; ++i) {
    std::vector<TaskId> deps;
    if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
    ASSERT_TRUE(chain.Add("add", DType::kF32, {acc->desc, ones->desc, acc->desc}, {}, deps).ok());
  }
  auto first = runtime->Submit(chain);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->Wait(std::chrono::seconds(10)).ok());
  // One task in 4 tiles: one event per tile.
  auto big = Upload(*runtime, std::vector<float>(4 * 8192, 1.0f));
  ASSERT_TRUE(big.ok());
  TaskGraph tiled(*runtime);
  TaskOptions four;
  four.tiles = 4;
  ASSERT_TRUE(tiled.Add("add", DType::kF32, {big->desc, big->desc, big->desc}, {}, {}, four).ok());
  const std::uint64_t direct_before = runtime->stats().direct_submissions;
  auto second = runtime->Submit(tiled);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->Wait(std::chrono::seconds(10)).ok());
  ASSERT_TRUE(runtime->Synchronize().ok());
  // A help record is written after the helper's tiles and may land after
  // the completion: a parked worker has written all of them.
  ASSERT_TRUE(runtime->WaitUntilParked().ok());
  auto result = Download(*runtime, *acc);
  ASSERT_TRUE(result.ok());
  for (float v : *result) ASSERT_EQ(v, static_cast<float>(kSteps));

  auto events = runtime->TraceEvents();
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  // Each submission has one admit and one complete record of the queue's
  // own, before its first task starts and after its last one ends.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>>
      task_span;  // first start, last end
  std::map<std::pair<std::uint64_t, std::string>, std::vector<const TraceEvent*>> queue_records;
  for (const TraceEvent& e : *events) {
    if (e.category == "queue") {
      queue_records[{e.sequence, e.name}].push_back(&e);
      continue;
    }
    EXPECT_EQ(e.category, "task");
    auto [span, fresh] = task_span.try_emplace(e.sequence, e.start_ns, e.start_ns + e.duration_ns);
    span->second.first = std::min(span->second.first, e.start_ns);
    span->second.second = std::max(span->second.second, e.start_ns + e.duration_ns);
  }
  // admit and complete for each submission, and help records (below).
  std::size_t kinds = 0;
  for (const auto& [key, records] : queue_records) kinds += key.second != "help" ? 1 : 0;
  ASSERT_EQ(kinds, 4u);
  for (const auto& future : {*first, *second}) {
    const auto& admit = queue_records[{future.sequence(), "admit"}];
    const auto& complete = queue_records[{future.sequence(), "complete"}];
    ASSERT_EQ(admit.size(), 1u);
    ASSERT_EQ(complete.size(), 1u);
    EXPECT_LE(admit[0]->start_ns + admit[0]->duration_ns, task_span[future.sequence()].first);
    EXPECT_GE(complete[0]->start_ns, task_span[future.sequence()].second);
    EXPECT_EQ(admit[0]->task_id, device::kTraceNoTask);
    EXPECT_FALSE(admit[0]->task_index.has_value());
  }
  // The 4-tile task runs as direct tiles: a block that helped its admitting
  // block has a help record (when it is among the traced blocks), on
  // another block than the admission's, ending before that block's tile.
  const std::vector<const TraceEvent*> helps = queue_records[{second->sequence(), "help"}];
  const std::size_t chain_helps = queue_records[{first->sequence(), "help"}].size();
  EXPECT_EQ(chain_helps, 0u);
  EXPECT_LE(helps.size(), 3u);
  const TraceEvent& admit_second = *queue_records[{second->sequence(), "admit"}].at(0);
  for (const TraceEvent* help : helps) {
    EXPECT_EQ(help->task_id, device::kTraceNoTask);
    EXPECT_NE(help->block, admit_second.block);
    std::uint64_t tile_start = ~0ull;
    for (const TraceEvent& e : *events) {
      if (e.category == "task" && e.block == help->block && e.sequence == second->sequence()) {
        tile_start = std::min(tile_start, e.start_ns);
      }
    }
    EXPECT_LE(help->start_ns + help->duration_ns, tile_start) << "block " << help->block;
  }
  // And the other way round: run as direct tiles (a lone tiled task
  // submitted alone, as in the test above), every block but the admitting
  // one that ran a tile of it got there as a helper, through HelpRunDirect,
  // which writes one help record per block. (The only other way, a handover
  // from an earlier direct submission of the same ring slot, cannot happen:
  // `second` is the first direct one. When the admitting block ran all four
  // tiles the loop checks nothing; the help records' count is recorded.)
  if (DirectTilesOn()) {
    ASSERT_EQ(DirectRunsSettled(*runtime, direct_before + 1), direct_before + 1);
    RecordProperty("help_records", static_cast<int>(helps.size()));
    std::set<std::uint32_t> helpers;
    for (const TraceEvent* help : helps) {
      EXPECT_TRUE(helpers.insert(help->block).second)
          << "two help records on block " << help->block;
    }
    for (const TraceEvent& e : *events) {
      if (e.category == "task" && e.sequence == second->sequence() &&
          e.block != admit_second.block) {
        EXPECT_EQ(helpers.count(e.block), 1u)
            << "block " << e.block << " ran tile " << e.tile << " with no help record";
      }
    }
  }
  ASSERT_EQ(events->size(), static_cast<std::size_t>(kSteps + 4 + 4) + helps.size());
  std::set<std::uint32_t> chain_tasks;
  std::set<std::uint32_t> tiles;
  const std::string version = runtime->Resolve("add", DType::kF32)->version.ToString();
  for (std::size_t i = 0; i < events->size(); ++i) {
    const TraceEvent& e = (*events)[i];
    if (i > 0 && (*events)[i - 1].block == e.block) {
      const TraceEvent& before = (*events)[i - 1];
      EXPECT_LE(before.start_ns + before.duration_ns, e.start_ns)
          << "events overlap on block " << e.block;
    }
    if (e.category == "queue") continue;
    EXPECT_EQ(e.name, "add f32");
    EXPECT_EQ(e.version, version);
    ASSERT_TRUE(e.task_index.has_value());
    EXPECT_GT(e.duration_ns, 0u);
    if (e.sequence == first->sequence()) {
      EXPECT_EQ(e.num_tiles, 1u);
      chain_tasks.insert(*e.task_index);
    } else {
      EXPECT_EQ(e.sequence, second->sequence());
      EXPECT_EQ(e.num_tiles, 4u);
      tiles.insert(e.tile);
    }
  }
  EXPECT_EQ(chain_tasks.size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(*chain_tasks.rbegin(), static_cast<std::uint32_t>(kSteps - 1));
  EXPECT_EQ(tiles, (std::set<std::uint32_t>{0, 1, 2, 3}));

  const std::string path = std::string(GPUOS_BINARY_DIR) + "/runtime_errors_test_trace.json";
  ASSERT_TRUE(runtime->ExportChromeTrace(path).ok());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const auto json = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << "not JSON: " << path;
  std::size_t complete = 0;
  std::map<long long, double> last_end_us;  // per tid
  for (const auto& event : json.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    ++complete;
    const long long tid = event.at("tid").get<long long>();
    const double ts = event.at("ts").get<double>();
    EXPECT_GE(ts, 0.0);
    if (last_end_us.count(tid) != 0) {
      EXPECT_LE(last_end_us[tid], ts + 1e-3) << "overlap on tid " << tid;
    }
    last_end_us[tid] = ts + event.at("dur").get<double>();
    EXPECT_TRUE(event.at("args").contains("sequence"));
    EXPECT_TRUE(event.at("args").contains("task_id"));
  }
  EXPECT_EQ(complete, events->size());
}

}  // namespace
}  // namespace gpuos::runtime
