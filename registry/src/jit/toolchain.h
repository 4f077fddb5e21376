// NVRTC and nvJitLink behind small functions: compile one generated source
// to a relocatable cubin or LTO-IR, link those into one cubin, report versions, find the toolkit
// headers, check architecture names.
//
// Thread safety: all functions may be called concurrently (NVRTC programs and
// nvJitLink handles are per call).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuos/registry/codegen.h"
#include "gpuos/registry/jit_builder.h"
#include "gpuos/status.h"

namespace gpuos::registry::jit {

// "13.0".
std::string NvrtcVersion();
std::string NvJitLinkVersion();

// Compute capabilities NVRTC can target, e.g. {75, 80, ..., 121}.
const std::vector<int>& SupportedArchNumbers();

// OK for "sm_<N>" with N one of SupportedArchNumbers(), and for the
// architecture-specific "sm_<N>a" where N >= 90. Otherwise InvalidArgument
// listing what is accepted.
Status CheckArch(const std::string& arch);

// Directory holding cuda_fp16.h and cuda_bf16.h: $CUDA_HOME/include,
// $CUDA_PATH/include, the include directory beside the loaded libnvrtc,
// /usr/local/cuda/include, /usr/include (first that has both). Unavailable
// otherwise. Looked up once.
Expected<std::string> ToolkitIncludeDir();

// The gpuos device headers (device/include/gpuos/device/*) as NVRTC
// in-memory headers: (include name "gpuos/device/abi.h", contents).
const std::vector<std::pair<std::string, std::string>>& DeviceHeaders();
// ContentHash over every embedded device file (headers and worker), part of
// every cache key.
const std::string& DeviceSourcesDigest();
// Every device/src/*.cu (the worker and the index arithmetic shared by all
// operators), named "device/src/<file>", in name order.
const std::vector<GeneratedSource>& DeviceRuntimeSources();

// NVRTC options for one unit of `arch` in `mode`, without the machine-
// specific include directory (this list is part of cache keys).
std::vector<std::string> NvrtcOptions(const std::string& arch, LinkMode mode);
// nvJitLink options (part of the image cache key).
std::vector<std::string> NvJitLinkOptions(const std::string& arch, LinkMode mode);

// Compiles `source` to a relocatable cubin (kSeparate) or to LTO-IR (kLto).
// On failure: CompileError whose message is the rewritten NVRTC log (see
// RewriteNvrtcLog).
Expected<std::string> CompileUnit(const GeneratedSource& source, const std::string& arch,
                                  LinkMode mode);

struct LinkInput {
  std::string name;         // for nvJitLink messages
  std::string_view object;  // what CompileUnit returned; outlives the call
};
// Links the units into one cubin. On failure: CompileError with the
// nvJitLink error log.
Expected<std::string> LinkCubin(const std::vector<LinkInput>& inputs, const std::string& arch,
                                LinkMode mode);

// Rewrites an NVRTC log for people: "file(12): error: m" becomes
// "file:12: error: m", the per-dtype suffix of #line file names ("@T=f16") is
// folded into one message listing the dtypes ("[T = f32, f16]"), identical
// messages are merged and NVRTC's error-count summary is dropped.
std::string RewriteNvrtcLog(const std::string& log);

}  // namespace gpuos::registry::jit
