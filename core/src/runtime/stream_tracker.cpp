// StreamIdleLedger and StreamTracker (gpuos/runtime/stream_tracker.h).
#include "gpuos/runtime/stream_tracker.h"

#include <dlfcn.h>

#include <algorithm>
#include <string>

#if __has_include(<cupti.h>)
#include <cupti.h>
#define GPUOS_HAVE_CUPTI 1
#else
#define GPUOS_HAVE_CUPTI 0
#endif

namespace gpuos::runtime {
namespace {

// cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, without cuda.h.
CUstream_st* const kLegacyStream = reinterpret_cast<CUstream_st*>(0x1);
CUstream_st* const kPerThreadStream = reinterpret_cast<CUstream_st*>(0x2);

CUstream_st* Canonical(CUstream_st* stream) { return stream == nullptr ? kLegacyStream : stream; }

// Findings kept at most: a process that synchronizes more streams than this
// loses the oldest finding (that stream is then asked about again).
constexpr std::size_t kMaxFindings = 64;

}  // namespace

void StreamIdleLedger::Note(CUctx_st* context, CUstream_st* stream, std::uint64_t mark) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Found& found : found_) {
    if (found.context == context && found.stream == stream) {
      found.mark = std::max(found.mark, mark);
      return;
    }
  }
  if (found_.size() < kMaxFindings) {
    found_.push_back({context, stream, mark});
    return;
  }
  Found& oldest = *std::min_element(found_.begin(), found_.end(),
                                    [](const Found& a, const Found& b) { return a.mark < b.mark; });
  oldest = {context, stream, mark};
}

void StreamIdleLedger::NoteIdle(CUctx_st* context, CUstream_st* stream, std::uint64_t mark) {
  stream = Canonical(stream);
  if (stream == kPerThreadStream) return;  // every thread's own: not told apart here
  Note(context, stream, mark);
}

void StreamIdleLedger::NoteAllIdle(CUctx_st* context, std::uint64_t mark) {
  Note(context, nullptr, mark);
}

bool StreamIdleLedger::KnownIdle(CUctx_st* context, CUstream_st* stream) const {
  stream = Canonical(stream);
  if (stream == kPerThreadStream) return false;
  // The count first: a call that enqueues after this load makes the answer
  // stale only as any answer about the present is (the caller orders its own
  // calls, not other threads').
  const std::uint64_t now = Mark();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Found& found : found_) {
    if (found.context == context && (found.stream == stream || found.stream == nullptr) &&
        found.mark == now) {
      return true;
    }
  }
  return false;
}

void NoteDriverCall(StreamIdleLedger& ledger, DriverCallKind kind, bool entering,
                    std::uint64_t* correlation, bool succeeded, CUctx_st* context,
                    CUstream_st* stream) {
  switch (kind) {
    case DriverCallKind::kEnqueuesNothing:
      return;
    case DriverCallKind::kMayEnqueue:
      // At the exit: the work is on its stream by then, so a query that
      // entered before this (and may have missed it) has an older mark.
      if (!entering) ledger.NoteEnqueue();
      return;
    default:
      break;
  }
  if (correlation == nullptr) return;
  if (entering) {
    *correlation = ledger.Mark();
    return;
  }
  if (!succeeded) return;
  if (kind == DriverCallKind::kContextIdleCheck) {
    ledger.NoteAllIdle(context, *correlation);
    return;
  }
  if (stream == nullptr && kind == DriverCallKind::kPerThreadStreamIdleCheck) {
    stream = kPerThreadStream;  // not kept: NoteIdle
  }
  ledger.NoteIdle(context, stream, *correlation);
}

#if GPUOS_HAVE_CUPTI

DriverCallKind ClassifyDriverCall(std::uint32_t cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamQuery:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
      return DriverCallKind::kStreamIdleCheck;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
      return DriverCallKind::kPerThreadStreamIdleCheck;
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
      return DriverCallKind::kContextIdleCheck;
    // Synchronizes the context it is given, which need not be the current
    // one: no finding, and no enqueue.
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
    // Calls that read or set host-side state and enqueue no work. Anything
    // not listed counts as an enqueue: a missing entry costs a query, a
    // wrong one a race, so only plain getters and context switches are here.
    case CUPTI_DRIVER_TRACE_CBID_cuInit:
    case CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceGet:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetName:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetUuid:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceGetUuid_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceTotalMem:
    case CUPTI_DRIVER_TRACE_CBID_cuDeviceTotalMem_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState:
    case CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxPushCurrent_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxPopCurrent_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetId:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetApiVersion:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetLimit:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetCacheConfig:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetSharedMemConfig:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxGetStreamPriorityRange:
    case CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress:
    case CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuGetErrorName:
    case CUPTI_DRIVER_TRACE_CBID_cuGetErrorString:
    case CUPTI_DRIVER_TRACE_CBID_cuGetExportTable:
    case CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute:
    case CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes:
    case CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute:
    case CUPTI_DRIVER_TRACE_CBID_cuFuncGetName:
    case CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute:
    case CUPTI_DRIVER_TRACE_CBID_cuKernelGetFunction:
    case CUPTI_DRIVER_TRACE_CBID_cuKernelGetName:
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleGetGlobal_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuOccupancyMaxActiveBlocksPerMultiprocessor:
    case CUPTI_DRIVER_TRACE_CBID_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuOccupancyMaxPotentialBlockSize:
    case CUPTI_DRIVER_TRACE_CBID_cuOccupancyMaxPotentialBlockSizeWithFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo:
    case CUPTI_DRIVER_TRACE_CBID_cuMemGetInfo_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemGetAddressRange:
    case CUPTI_DRIVER_TRACE_CBID_cuMemGetAddressRange_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostGetFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetPriority:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetPriority_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetFlags_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetId:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetId_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetDevice:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetDevice_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuThreadExchangeStreamCaptureMode:
    case CUPTI_DRIVER_TRACE_CBID_cuEventQuery:
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuEventElapsedTime:
    case CUPTI_DRIVER_TRACE_CBID_cuEventElapsedTime_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuEventCreate:
    case CUPTI_DRIVER_TRACE_CBID_cuEventDestroy:
    case CUPTI_DRIVER_TRACE_CBID_cuEventDestroy_v2:
      return DriverCallKind::kEnqueuesNothing;
    default:
      return DriverCallKind::kMayEnqueue;
  }
}

DriverCallKind ClassifyRuntimeCall(std::uint32_t cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
      return DriverCallKind::kStreamIdleCheck;
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
      return DriverCallKind::kPerThreadStreamIdleCheck;
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020:
      return DriverCallKind::kContextIdleCheck;
    // As for the driver: getters and device selection only.
    case CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetErrorString_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetErrorName_v6050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceFlags_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMemGetInfo_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080:
    case CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceCanAccessPeer_v4000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetLimit_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetCacheConfig_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetStreamPriorityRange_v5050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetPriority_v5050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetPriority_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetFlags_v5050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetFlags_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetId_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetId_ptsz_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetDevice_v12080:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetDevice_ptsz_v12080:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v10010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v12030:
    case CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_ptsz_v11030:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_v12050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPointByVersion_ptsz_v12050:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetSymbolAddress_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetSymbolSize_v3020:
      return DriverCallKind::kEnqueuesNothing;
    default:
      return DriverCallKind::kMayEnqueue;
  }
}

struct StreamTracker::Cupti {
  using SubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  using EnableDomainFn = CUptiResult (*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
  using UnsubscribeFn = CUptiResult (*)(CUpti_SubscriberHandle);
  using ResultStringFn = CUptiResult (*)(CUptiResult, const char**);
  void* library = nullptr;
  SubscribeFn subscribe = nullptr;
  EnableDomainFn enable_domain = nullptr;
  UnsubscribeFn unsubscribe = nullptr;
  ResultStringFn result_string = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;

  std::string Describe(CUptiResult result) const {
    const char* text = nullptr;
    if (result_string != nullptr && result_string(result, &text) == CUPTI_SUCCESS &&
        text != nullptr) {
      return text;
    }
    return "CUPTI error " + std::to_string(static_cast<int>(result));
  }
};

namespace {

// CUPTI's callback, on the thread making the driver call. The count at a
// check's entry travels to its exit in the call's correlation data.
void CUPTIAPI OnDriverCall(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* data) {
  if (data == nullptr) return;
  DriverCallKind kind;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    kind = ClassifyDriverCall(cbid);
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    kind = ClassifyRuntimeCall(cbid);
  } else {
    return;
  }
  if (kind == DriverCallKind::kEnqueuesNothing) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  const bool entering = call->callbackSite == CUPTI_API_ENTER;
  // CUresult and cudaError_t both read 0 for success.
  const auto* result = static_cast<const int*>(call->functionReturnValue);
  const bool succeeded = !entering && result != nullptr && *result == 0;
  // The parameters of every stream query and synchronize, driver or
  // runtime, _ptsz or not, begin with the stream.
  CUstream_st* stream = nullptr;
  if (!entering && (kind == DriverCallKind::kStreamIdleCheck ||
                    kind == DriverCallKind::kPerThreadStreamIdleCheck)) {
    const auto* first = static_cast<CUstream_st* const*>(call->functionParams);
    if (first == nullptr) return;
    stream = *first;
  }
  NoteDriverCall(*static_cast<StreamIdleLedger*>(userdata), kind, entering, call->correlationData,
                 succeeded, call->context, stream);
}

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

Expected<std::unique_ptr<StreamTracker>> StreamTracker::Start() {
  std::unique_ptr<StreamTracker> tracker(new StreamTracker());
  auto cupti = std::make_unique<Cupti>();
  for (const char* name : {"libcupti.so.13", "libcupti.so"}) {
    cupti->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (cupti->library != nullptr) break;
  }
  if (cupti->library == nullptr) {
    const char* error = dlerror();
    return Unavailable(std::string("the stream tracker needs CUPTI (libcupti.so.13): ") +
                       (error != nullptr ? error : "not found"));
  }
  cupti->subscribe = Symbol<Cupti::SubscribeFn>(cupti->library, "cuptiSubscribe");
  cupti->enable_domain = Symbol<Cupti::EnableDomainFn>(cupti->library, "cuptiEnableDomain");
  cupti->unsubscribe = Symbol<Cupti::UnsubscribeFn>(cupti->library, "cuptiUnsubscribe");
  cupti->result_string = Symbol<Cupti::ResultStringFn>(cupti->library, "cuptiGetResultString");
  if (cupti->subscribe == nullptr || cupti->enable_domain == nullptr ||
      cupti->unsubscribe == nullptr) {
    return Unavailable(
        "the stream tracker: libcupti lacks cuptiSubscribe/EnableDomain/Unsubscribe");
  }
  CUptiResult result = cupti->subscribe(&cupti->subscriber, OnDriverCall, &tracker->ledger_);
  if (result != CUPTI_SUCCESS) {
    const std::string why = cupti->Describe(result);
    return Unavailable("the stream tracker could not subscribe to CUPTI (" + why +
                       "; another subscriber, such as a profiler, may hold it)");
  }
  result = cupti->enable_domain(1, cupti->subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  if (result == CUPTI_SUCCESS) {
    result = cupti->enable_domain(1, cupti->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  }
  if (result != CUPTI_SUCCESS) {
    const std::string why = cupti->Describe(result);
    cupti->unsubscribe(cupti->subscriber);
    return Unavailable(
        "the stream tracker could not enable CUPTI's driver and runtime callbacks (" + why + ")");
  }
  tracker->cupti_ = std::move(cupti);
  return tracker;
}

StreamTracker::~StreamTracker() {
  if (cupti_ == nullptr) return;
  cupti_->unsubscribe(cupti_->subscriber);
  // The library stays loaded (as after a failed Start): a callback may still
  // be returning on another thread, and CUPTI does not support being
  // unloaded and loaded again.
}

#else  // no CUPTI headers at build time

DriverCallKind ClassifyDriverCall(std::uint32_t) { return DriverCallKind::kMayEnqueue; }
DriverCallKind ClassifyRuntimeCall(std::uint32_t) { return DriverCallKind::kMayEnqueue; }

struct StreamTracker::Cupti {};

Expected<std::unique_ptr<StreamTracker>> StreamTracker::Start() {
  return Unavailable("the stream tracker: gpuos was built without CUPTI's headers (cupti.h)");
}

StreamTracker::~StreamTracker() = default;

#endif

}  // namespace gpuos::runtime
