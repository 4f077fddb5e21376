// The stream tracker (gpuos/runtime/stream_tracker.h): its ledger and its
// classification of driver calls without a GPU; its CUPTI subscription
// where a driver and CUPTI are present (skipped with the reason otherwise).
#include "gpuos/runtime/stream_tracker.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "gpuos/cuda_driver.h"

#if __has_include(<cupti.h>)
#include <cupti.h>
#define GPUOS_TEST_HAVE_CUPTI 1
#else
#define GPUOS_TEST_HAVE_CUPTI 0
#endif

namespace gpuos::runtime {
namespace {

CUstream_st* FakeStream(std::uintptr_t n) { return reinterpret_cast<CUstream_st*>(n * 64); }
CUctx_st* FakeContext(std::uintptr_t n) { return reinterpret_cast<CUctx_st*>(n * 4096); }
CUstream_st* const kLegacy = reinterpret_cast<CUstream_st*>(0x1);
CUctx_st* const kContext = FakeContext(1);

TEST(StreamIdleLedgerTest, UnknownUntilFoundIdleThenUntilAnEnqueue) {
  StreamIdleLedger ledger;
  const auto s = FakeStream(1);
  EXPECT_FALSE(ledger.KnownIdle(kContext, s));
  ledger.NoteIdle(kContext, s, ledger.Mark());
  EXPECT_TRUE(ledger.KnownIdle(kContext, s));
  EXPECT_FALSE(ledger.KnownIdle(kContext, FakeStream(2)));  // only the stream found idle
  ledger.NoteEnqueue();                                     // on any stream: conservative
  EXPECT_FALSE(ledger.KnownIdle(kContext, s));
  ledger.NoteIdle(kContext, s, ledger.Mark());
  EXPECT_TRUE(ledger.KnownIdle(kContext, s));
}

TEST(StreamIdleLedgerTest, AFindingOlderThanAnEnqueueDoesNotCount) {
  StreamIdleLedger ledger;
  const auto s = FakeStream(3);
  const std::uint64_t before_query = ledger.Mark();
  ledger.NoteEnqueue();  // another thread enqueued while the query ran
  ledger.NoteIdle(kContext, s, before_query);
  EXPECT_FALSE(ledger.KnownIdle(kContext, s));
  // A later finding counts; an older one never lowers it again.
  ledger.NoteIdle(kContext, s, ledger.Mark());
  ledger.NoteIdle(kContext, s, before_query);
  EXPECT_TRUE(ledger.KnownIdle(kContext, s));
}

TEST(StreamIdleLedgerTest, NullIsTheLegacyStreamAndAContextSynchronizeCoversItsStreams) {
  StreamIdleLedger ledger;
  ledger.NoteIdle(kContext, nullptr, ledger.Mark());
  EXPECT_TRUE(ledger.KnownIdle(kContext, kLegacy));
  EXPECT_TRUE(ledger.KnownIdle(kContext, nullptr));
  ledger.NoteEnqueue();
  EXPECT_FALSE(ledger.KnownIdle(kContext, kLegacy));
  ledger.NoteAllIdle(kContext, ledger.Mark());
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(7)));
  EXPECT_TRUE(ledger.KnownIdle(kContext, kLegacy));
  ledger.NoteEnqueue();
  EXPECT_FALSE(ledger.KnownIdle(kContext, FakeStream(7)));
}

TEST(StreamIdleLedgerTest, AnotherContextsStreamsAreNotKnown) {
  // The legacy stream is one handle in every context (every device's
  // primary context): finding device 0's idle says nothing of device 1's.
  StreamIdleLedger ledger;
  ledger.NoteIdle(kContext, kLegacy, ledger.Mark());
  EXPECT_FALSE(ledger.KnownIdle(FakeContext(2), kLegacy));
  ledger.NoteAllIdle(kContext, ledger.Mark());
  EXPECT_FALSE(ledger.KnownIdle(FakeContext(2), FakeStream(9)));
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(9)));
}

TEST(StreamIdleLedgerTest, ManyStreamsKeepTheNewestFindings) {
  // 64 findings are kept; a 65th replaces the one with the oldest mark.
  StreamIdleLedger ledger;
  ledger.NoteIdle(kContext, FakeStream(1), ledger.Mark());
  ledger.NoteEnqueue();
  for (std::uintptr_t n = 2; n <= 64; ++n) ledger.NoteIdle(kContext, FakeStream(n), ledger.Mark());
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(2)));
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(64)));
  ledger.NoteIdle(kContext, FakeStream(65), ledger.Mark());
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(65)));
  for (std::uintptr_t n = 2; n <= 64; ++n) {
    EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(n))) << n;
  }
  // The finding replaced was stream 1's, the oldest (the 63 newer ones all
  // still count above); it was stale anyway.
  EXPECT_FALSE(ledger.KnownIdle(kContext, FakeStream(1)));
}

// The callbacks' rule (NoteDriverCall), as CUPTI would call it.
constexpr bool kEnter = true;
constexpr bool kExit = false;

void Enqueue(StreamIdleLedger& ledger, bool site) {
  std::uint64_t scratch = 0;
  NoteDriverCall(ledger, DriverCallKind::kMayEnqueue, site, &scratch, true, kContext, nullptr);
}

void Check(StreamIdleLedger& ledger, DriverCallKind kind, bool site, std::uint64_t* scratch,
           bool succeeded, CUstream_st* stream) {
  NoteDriverCall(ledger, kind, site, scratch, succeeded, kContext, stream);
}

TEST(StreamTrackerRuleTest, AQueryFindsAStreamIdleAsOfItsEntry) {
  StreamIdleLedger ledger;
  const auto s = FakeStream(4);
  std::uint64_t scratch = 0;
  Check(ledger, DriverCallKind::kStreamIdleCheck, kEnter, &scratch, false, nullptr);
  Check(ledger, DriverCallKind::kStreamIdleCheck, kExit, &scratch, true, s);
  EXPECT_TRUE(ledger.KnownIdle(kContext, s));
  Enqueue(ledger, kEnter);
  EXPECT_TRUE(ledger.KnownIdle(kContext, s));  // nothing on the stream until the call returns
  Enqueue(ledger, kExit);
  EXPECT_FALSE(ledger.KnownIdle(kContext, s));
  // A query that failed or found work (not CUDA_SUCCESS) finds nothing.
  Check(ledger, DriverCallKind::kStreamIdleCheck, kEnter, &scratch, false, nullptr);
  Check(ledger, DriverCallKind::kStreamIdleCheck, kExit, &scratch, false, s);
  EXPECT_FALSE(ledger.KnownIdle(kContext, s));
}

TEST(StreamTrackerRuleTest, AnEnqueueInProgressDuringAQueryMakesItsFindingStale) {
  // Another thread's launch enters, a query enters and finds the stream idle
  // (the launch's work not there yet), then the launch returns: the stream
  // is not idle, and the ledger must not say so.
  StreamIdleLedger ledger;
  const auto s = FakeStream(5);
  std::uint64_t scratch = 0;
  Enqueue(ledger, kEnter);
  Check(ledger, DriverCallKind::kStreamIdleCheck, kEnter, &scratch, false, nullptr);
  Check(ledger, DriverCallKind::kStreamIdleCheck, kExit, &scratch, true, s);
  Enqueue(ledger, kExit);
  EXPECT_FALSE(ledger.KnownIdle(kContext, s));
}

TEST(StreamTrackerRuleTest, PerThreadDefaultStreamsAreNeverKnown) {
  // A null stream in a _ptsz call is the calling thread's own default
  // stream: one thread's finding would say nothing of another's.
  StreamIdleLedger ledger;
  std::uint64_t scratch = 0;
  Check(ledger, DriverCallKind::kPerThreadStreamIdleCheck, kEnter, &scratch, false, nullptr);
  Check(ledger, DriverCallKind::kPerThreadStreamIdleCheck, kExit, &scratch, true, nullptr);
  EXPECT_FALSE(ledger.KnownIdle(kContext, reinterpret_cast<CUstream_st*>(0x2)));
  EXPECT_FALSE(ledger.KnownIdle(kContext, kLegacy));  // nor is it the legacy stream
  // An explicit stream in a _ptsz call is that stream.
  Check(ledger, DriverCallKind::kPerThreadStreamIdleCheck, kEnter, &scratch, false, nullptr);
  Check(ledger, DriverCallKind::kPerThreadStreamIdleCheck, kExit, &scratch, true, FakeStream(6));
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(6)));
}

TEST(StreamTrackerRuleTest, AContextSynchronizeFindsEveryStreamOfItsContextIdle) {
  StreamIdleLedger ledger;
  std::uint64_t scratch = 0;
  Enqueue(ledger, kExit);
  Check(ledger, DriverCallKind::kContextIdleCheck, kEnter, &scratch, false, nullptr);
  Check(ledger, DriverCallKind::kContextIdleCheck, kExit, &scratch, true, nullptr);
  EXPECT_TRUE(ledger.KnownIdle(kContext, FakeStream(8)));
  EXPECT_FALSE(ledger.KnownIdle(FakeContext(3), FakeStream(8)));
}

TEST(StreamIdleLedgerTest, EnqueuesFromManyThreadsAreAllCounted) {
  StreamIdleLedger ledger;
  const std::uint64_t start = ledger.Mark();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&ledger] {
      for (int i = 0; i < 10000; ++i) ledger.NoteEnqueue();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ledger.Mark() - start, 40000u);
}

#if GPUOS_TEST_HAVE_CUPTI
TEST(StreamTrackerTest, DriverCallsAreClassifiedConservatively) {
  using K = DriverCallKind;
  EXPECT_EQ(ClassifyDriverCall(CUPTI_DRIVER_TRACE_CBID_cuStreamQuery), K::kStreamIdleCheck);
  EXPECT_EQ(ClassifyDriverCall(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize), K::kStreamIdleCheck);
  EXPECT_EQ(ClassifyDriverCall(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize), K::kContextIdleCheck);
  EXPECT_EQ(ClassifyDriverCall(CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent), K::kEnqueuesNothing);
  EXPECT_EQ(ClassifyDriverCall(CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute), K::kEnqueuesNothing);
  // Work on a stream, and whatever the list does not know.
  for (auto cbid :
       {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
        CUPTI_DRIVER_TRACE_CBID_cuStreamWaitValue64_v2, CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
        CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc}) {
    EXPECT_EQ(ClassifyDriverCall(cbid), K::kMayEnqueue) << cbid;
  }
  EXPECT_EQ(ClassifyDriverCall(0xfffffu), K::kMayEnqueue);
  EXPECT_EQ(ClassifyDriverCall(CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz),
            K::kPerThreadStreamIdleCheck);
}

TEST(StreamTrackerTest, RuntimeCallsAreClassifiedConservatively) {
  using K = DriverCallKind;
  EXPECT_EQ(ClassifyRuntimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020),
            K::kStreamIdleCheck);
  EXPECT_EQ(ClassifyRuntimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000),
            K::kPerThreadStreamIdleCheck);
  EXPECT_EQ(ClassifyRuntimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020),
            K::kContextIdleCheck);
  EXPECT_EQ(ClassifyRuntimeCall(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020), K::kEnqueuesNothing);
  for (auto cbid : {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                    CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
                    CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
                    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020}) {
    EXPECT_EQ(ClassifyRuntimeCall(cbid), K::kMayEnqueue) << cbid;
  }
}
#endif

// With a driver: a stream the tracker saw synchronized is known idle until
// work is enqueued on it (or anywhere), and a query that finds it idle
// again says so. Skips where the tracker cannot start (no GPU, no CUPTI, or
// a profiler holding CUPTI). The tracker unsubscribes at the test's end,
// when no other thread makes driver calls.
TEST(StreamTrackerTest, FollowsAStreamThroughTheDriver) {
  auto driver = LoadCudaDriver();
  if (!driver.ok()) GTEST_SKIP() << driver.status().ToString();
  if (auto count = CudaDeviceCount(); !count.ok()) GTEST_SKIP() << count.status().ToString();
  const CudaDriverApi& cuda = **driver;
  CUdevice device = 0;
  CUcontext context = nullptr;
  ASSERT_EQ(cuda.cuDeviceGet(&device, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuda.cuDevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
  ASSERT_EQ(cuda.cuCtxSetCurrent(context), CUDA_SUCCESS);
  auto tracker = StreamTracker::Start();
  if (!tracker.ok()) GTEST_SKIP() << tracker.status().ToString();
  CUstream stream = nullptr;
  ASSERT_EQ(cuda.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr buffer = 0;
  ASSERT_EQ(cuda.cuMemAlloc(&buffer, 1 << 20), CUDA_SUCCESS);
  ASSERT_EQ(cuda.cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_TRUE((*tracker)->KnownIdle(context, stream));
  ASSERT_EQ(cuda.cuMemsetD32Async(buffer, 7u, (1 << 20) / 4, stream), CUDA_SUCCESS);
  EXPECT_FALSE((*tracker)->KnownIdle(context, stream));
  ASSERT_EQ(cuda.cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_TRUE((*tracker)->KnownIdle(context, stream));
  ASSERT_EQ(cuda.cuMemsetD32Async(buffer, 8u, (1 << 20) / 4, stream), CUDA_SUCCESS);
  CUresult query = CUDA_ERROR_NOT_READY;
  while ((query = cuda.cuStreamQuery(stream)) == CUDA_ERROR_NOT_READY) {
  }
  ASSERT_EQ(query, CUDA_SUCCESS);
  EXPECT_TRUE((*tracker)->KnownIdle(context, stream));
  EXPECT_GE((*tracker)->enqueues(), 3u);  // the allocation and the two memsets
  (void)cuda.cuMemFree(buffer);
  (void)cuda.cuStreamDestroy(stream);
  (void)cuda.cuDevicePrimaryCtxRelease(device);
}

}  // namespace
}  // namespace gpuos::runtime
