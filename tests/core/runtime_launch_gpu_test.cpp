// Tile launches (Runtime::LaunchTiles, docs/runtime.md, "Tile launches"): a
// graph's one tiled task run as a kernel of its own on a caller's stream.
// Every tile covers the items the worker would give it, the launch is
// ordered on its stream (held back by a host latch, it has not run; the
// host did not wait), an operator's error lands in the caller's status, and
// graphs a launch cannot carry are refused; address tables reach every tile
// through both launchers; ParkNow ends an idle worker grid (what a caller
// does before a launch that would otherwise wait for the grid's park). Skips with the reason where
// there is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>

#include "runtime_gpu_fixture.h"
#include "runtime_stream_util.h"
#include "runtime_table_pack.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using testing::AddAddressSum;
using testing::DeviceTensor;
using testing::Download;
using testing::Filled;
using testing::HostLatch;
using testing::TablePackConfig;
using testing::Upload;
using testing::UserStream;

class RuntimeLaunchGpuTest : public testing::GpuRuntimeTest {};

constexpr std::size_t kN = 65536 + 37;  // tiles of 64-aligned chunks and a short last one

std::vector<float> Ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 101);
  return v;
}

// out = x + alpha * ones over kN elements: x a Ramp, `out` filled with
// `fill` before the run.
struct AddOperands {
  DeviceTensor x, ones, out;
};

Expected<AddOperands> UploadAddOperands(Runtime& runtime, float fill) {
  GPUOS_ASSIGN_OR_RETURN(DeviceTensor x, Upload(runtime, Ramp(kN)));
  GPUOS_ASSIGN_OR_RETURN(DeviceTensor ones, Upload(runtime, Filled(kN, 1.0f)));
  GPUOS_ASSIGN_OR_RETURN(DeviceTensor out, Upload(runtime, Filled(kN, fill)));
  return AddOperands{std::move(x), std::move(ones), std::move(out)};
}

Status AddElementwiseAdd(TaskGraph& graph, const AddOperands& operands, const char* alpha) {
  return graph
      .Add("add", DType::kF32, {operands.x.desc, operands.ones.desc, operands.out.desc},
           {{"alpha", alpha}})
      .status();
}

// Success when every element of `out` is x + alpha (x the Ramp), else the
// first element that is not (or the download's error).
::testing::AssertionResult OutIsRampPlus(Runtime& runtime, const AddOperands& operands,
                                         float alpha) {
  auto got = Download(runtime, operands.out);
  if (!got.ok()) return ::testing::AssertionFailure() << got.status().ToString();
  const std::vector<float> xs = Ramp(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    if ((*got)[i] != xs[i] + alpha) {
      return ::testing::AssertionFailure()
             << "out[" << i << "] = " << (*got)[i] << ", expected " << xs[i] + alpha;
    }
  }
  return ::testing::AssertionSuccess();
}

// out = x + 3 * ones, one tiled add: every element, so every tile ran over
// its own items and none was skipped or run twice into a wrong place.
TEST_F(RuntimeLaunchGpuTest, EveryTileRunsOnTheCallersStream) {
  OPEN_OR_SKIP(runtime, Open());
  auto operands = UploadAddOperands(*runtime, NAN);
  ASSERT_TRUE(operands.ok()) << operands.status().ToString();
  TaskGraph graph(*runtime);
  ASSERT_OK(AddElementwiseAdd(graph, *operands, "3"));
  ASSERT_GE(graph.tasks()[0].num_tiles, 8u);
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const std::uint64_t before = runtime->stats().tile_launches;
  const std::uint64_t submissions = runtime->stats().submissions;
  ASSERT_OK(runtime->LaunchTiles(graph, (*stream)->get()));
  ASSERT_OK((*stream)->Synchronize());
  EXPECT_EQ(runtime->stats().tile_launches, before + 1);
  EXPECT_EQ(runtime->stats().submissions, submissions);  // not through the queue
  EXPECT_TRUE(OutIsRampPlus(*runtime, *operands, 3.0f));
}

// Held back by a latch, the launch has not run when LaunchTiles returns (the
// host waits for nothing) and runs once the stream moves on.
TEST_F(RuntimeLaunchGpuTest, LaunchStartsAfterTheStreamsEarlierWork) {
  OPEN_OR_SKIP(runtime, Open());
  auto operands = UploadAddOperands(*runtime, -1.0f);
  ASSERT_TRUE(operands.ok()) << operands.status().ToString();
  TaskGraph graph(*runtime);
  ASSERT_OK(AddElementwiseAdd(graph, *operands, "2"));
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  auto latch = HostLatch::Create();  // after the stream: opened and waited for first
  ASSERT_TRUE(latch.ok());
  ASSERT_OK((*latch)->HoldBack((*stream)->get()));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_OK(runtime->LaunchTiles(graph, (*stream)->get()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ((*stream)->Query(), CUDA_ERROR_NOT_READY);
  auto held = Download(*runtime, operands->out);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ((*held)[0], -1.0f);
  EXPECT_EQ((*held)[kN - 1], -1.0f);
  (*latch)->Open();
  ASSERT_OK((*stream)->Synchronize());
  EXPECT_TRUE(OutIsRampPlus(*runtime, *operands, 2.0f));
}

// A failing operator reports into the caller's status (mapped memory): the
// error code, the task and the ctx.fail() code; without a status the
// launch still runs (nothing reported).
TEST_F(RuntimeLaunchGpuTest, OperatorErrorsLandInTheCallersStatus) {
  OPEN_OR_SKIP(runtime,
               OpenWithSpin(RuntimeConfig{}, "spin", "0.1.0", "runtime_launch_gpu_test.cpp",
                            "runtime_launch_test_cache.db"));
  auto flag = Upload(*runtime, Filled(256, 0.0f));
  ASSERT_TRUE(flag.ok());
  TaskGraph failing(*runtime);
  ASSERT_TRUE(failing.Add("spin", DType::kF32, {flag->desc}, {{"fail_code", "9"}}).ok());
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  const CudaDriverApi& driver = (*stream)->driver();
  void* host = nullptr;
  ASSERT_EQ(driver.cuMemHostAlloc(&host, sizeof(device::WorkerStatus), CU_MEMHOSTALLOC_DEVICEMAP),
            CUDA_SUCCESS);
  std::memset(host, 0, sizeof(device::WorkerStatus));
  CUdeviceptr status_address = 0;
  ASSERT_EQ(driver.cuMemHostGetDevicePointer(&status_address, host, 0), CUDA_SUCCESS);
  ASSERT_OK(runtime->LaunchTiles(failing, (*stream)->get(), status_address));
  ASSERT_OK((*stream)->Synchronize());
  const auto* status = static_cast<const device::WorkerStatus*>(host);
  EXPECT_EQ(status->error, device::kWorkerOperatorFailed);
  EXPECT_EQ(status->detail, 9u);
  EXPECT_NE(DescribeWorkerError(status->error, status->detail).find("code 9"), std::string::npos);
  // The same task writing 5: runs with no status to report into.
  TaskGraph writing(*runtime);
  ASSERT_TRUE(writing.Add("spin", DType::kF32, {flag->desc}, {{"value", "5"}}).ok());
  ASSERT_OK(runtime->LaunchTiles(writing, (*stream)->get()));
  ASSERT_OK((*stream)->Synchronize());
  auto got = Download(*runtime, *flag);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[255], 5.0f);
  (void)driver.cuMemFreeHost(host);
}

// An address table (a stitched program's way) reaches every tile through
// either launcher: 25 addresses (the anchor and two records: the launcher
// of 4 descriptors) and 100 (six: the launcher of 16). Tile t writes
// sum(k * value at address k) + t.
TEST_F(RuntimeLaunchGpuTest, AddressTablesReachEveryTileThroughEitherLauncher) {
  OPEN_OR_SKIP(runtime, OpenConfig(TablePackConfig()));
  auto stream = UserStream::Create();
  ASSERT_TRUE(stream.ok());
  for (std::size_t count : {std::size_t{25}, std::size_t{100}}) {
    std::vector<float> values(count);
    for (std::size_t k = 0; k < count; ++k) values[k] = static_cast<float>(k % 7 + 1);
    auto held = Upload(*runtime, values);
    auto out = Upload(*runtime, Filled(5, NAN));
    ASSERT_TRUE(held.ok() && out.ok());
    TaskGraph graph(*runtime);
    ASSERT_OK(AddAddressSum(graph, *out, *held, count, 5));
    EXPECT_EQ(graph.tensors().size(), 1 + (count + 19) / 20) << count;
    ASSERT_OK(runtime->LaunchTiles(graph, (*stream)->get()));
    ASSERT_OK((*stream)->Synchronize());
    auto got = Download(*runtime, *out);
    ASSERT_TRUE(got.ok());
    float sum = 0;
    for (std::size_t k = 0; k < count; ++k) sum += static_cast<float>(k) * values[k];
    EXPECT_EQ(*got, (std::vector<float>{sum, sum + 1, sum + 2, sum + 3, sum + 4})) << count;
  }
}

// Activity reports a running grid and the requests so far (submissions but
// stand-ins for launches, and KeepWarm calls); ParkNow refuses while a
// submission is in flight (a closed gate holds one) and otherwise ends the
// grid at once (idle_park is 10 s here, so only the request can have ended
// it); the next Submit relaunches it and runs.
TEST_F(RuntimeLaunchGpuTest, ParkNowEndsAnIdleWorkerAndTheNextSubmitRelaunchesIt) {
  RuntimeConfig config;
  config.idle_park = std::chrono::seconds(10);
  OPEN_OR_SKIP(runtime, Open(config));
  EXPECT_FALSE(runtime->Activity().running);  // nothing launched yet
  ASSERT_OK(runtime->ParkNow());              // nothing to park
  auto operands = UploadAddOperands(*runtime, NAN);
  ASSERT_TRUE(operands.ok()) << operands.status().ToString();
  TaskGraph graph(*runtime);
  ASSERT_OK(AddElementwiseAdd(graph, *operands, "1"));
  auto gated = runtime->Submit(graph, SubmitOptions{.open_later = true});
  ASSERT_TRUE(gated.ok()) << gated.status().ToString();
  const WorkerActivity running = runtime->Activity();
  EXPECT_TRUE(running.running);
  EXPECT_EQ(running.requests, 1u);  // the gated submission
  const Status refused = runtime->ParkNow();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_TRUE(runtime->Activity().running);
  ASSERT_OK(runtime->OpenGate(*gated));
  ASSERT_OK(gated->Wait());
  const std::uint64_t launches = runtime->stats().launches;
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_OK(runtime->ParkNow(std::chrono::seconds(2)));
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(1));
  EXPECT_FALSE(runtime->Activity().running);
  EXPECT_EQ(runtime->stats().early_parks, 1u);
  // Relaunched by the next Submit, which runs on the new grid.
  TaskGraph again(*runtime);
  ASSERT_OK(AddElementwiseAdd(again, *operands, "5"));
  auto future = runtime->Submit(again, SubmitOptions{.stands_in_for_launch = true});
  ASSERT_TRUE(future.ok()) << future.status().ToString();
  ASSERT_OK(future->Wait());
  EXPECT_EQ(runtime->stats().launches, launches + 1);
  EXPECT_TRUE(runtime->Activity().running);
  // A stand-in for a launch is no request of others; a KeepWarm is.
  EXPECT_EQ(runtime->Activity().requests, 1u);
  ASSERT_OK(runtime->KeepWarm());
  EXPECT_EQ(runtime->Activity().requests, 2u);
  EXPECT_TRUE(OutIsRampPlus(*runtime, *operands, 5.0f));
}

TEST_F(RuntimeLaunchGpuTest, GraphsALaunchCannotCarryAreRefused) {
  OPEN_OR_SKIP(runtime, Open());
  auto a = Upload(*runtime, Filled(64, 1.0f));
  ASSERT_TRUE(a.ok());
  TaskGraph two(*runtime);
  ASSERT_TRUE(two.Add("add", DType::kF32, {a->desc, a->desc, a->desc}).ok());
  ASSERT_TRUE(two.Add("mul", DType::kF32, {a->desc, a->desc, a->desc}).ok());
  const Status refused = runtime->LaunchTiles(two, nullptr);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("one task"), std::string::npos) << refused.message();
  TaskGraph empty(*runtime);
  EXPECT_EQ(runtime->LaunchTiles(empty, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime->stats().tile_launches, 0u);
}

}  // namespace
}  // namespace gpuos::runtime
