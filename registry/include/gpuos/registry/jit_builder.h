// The JIT build service: operator specs in, kernel image out (docs/jit.md).
//
//   generated operator source --NVRTC--> object (per operator, cached) --+
//   device/src/*.cu (worker, indexing) --NVRTC--> object (cached) -------+--nvJitLink--> cubin
//   operator table (generated) --NVRTC--> object (cached) ---------------+    (cached)
//
// An object is a relocatable cubin (LinkMode::kSeparate, the default) or
// LTO-IR (LinkMode::kLto).
//
// Every artifact is stored in a BuildCache under a content hash of everything
// that determines its bytes, so building the same set again costs a hash and
// one cache lookup. No GPU is needed; the target architecture comes from the
// options, GPUOS_ARCH, or the GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpuos/registry/build_cache.h"
#include "gpuos/registry/kernel_image.h"
#include "gpuos/registry/operator_spec.h"
#include "gpuos/status.h"

namespace gpuos::registry {

// What compiles and links device code here (for `gpuos doctor`).
struct JitToolchain {
  std::string nvrtc_version;                 // "13.0"
  std::string nvjitlink_version;             // "13.0"
  std::vector<std::string> supported_archs;  // "sm_75", "sm_80", ...
  std::string toolkit_include_dir;           // where cuda_fp16.h was found; "" if not
  std::string toolkit_include_error;         // why it was not found
  std::uint32_t runtime_abi_version = 0;     // GPUOS_RUNTIME_ABI_VERSION
};
JitToolchain DescribeJitToolchain();

// The architecture to build for: `requested` when not empty, else GPUOS_ARCH,
// else the architecture of CUDA device 0. Errors: InvalidArgument for a name
// NVRTC cannot target (the message lists the accepted ones); Unavailable when
// nothing was requested and no GPU answers (the message asks for --arch or
// GPUOS_ARCH and says why detection failed).
Expected<std::string> ResolveTargetArch(const std::string& requested);

enum class ProgressMode {
  kAuto,   // a bar on a terminal when several units compile, else kLines
  kQuiet,  // nothing
  kLines,  // one line per compiled unit and per link on stderr
  kBar,    // a redrawn bar on stderr
};

// One finished step of a build, for callers that show progress themselves.
struct BuildEvent {
  enum class Stage { kCompile, kLink };
  Stage stage = Stage::kCompile;
  std::string unit;  // "add 1.0.0", "device/src/worker.cu", "operator table"; kLink: "image (...)"
  bool cached = false;
  bool failed = false;  // the unit did not compile (the build will fail)
  double seconds = 0;
  int done = 0;   // compile units finished so far (kCompile)
  int total = 0;  // compile units in this build
};

// How units become one image. kSeparate: NVRTC runs ptxas per unit
// (-rdc=true) and nvJitLink only links relocatable cubins: a new operator
// costs one unit's compilation and a link of milliseconds. kLto: NVRTC emits
// LTO-IR (-dlto) and nvJitLink optimizes and compiles the whole image at once
// (-lto): no gain for code that is reached through a function table, and
// ptxas time grows faster than linearly with the image (docs/jit.md,
// "Separate compilation").
enum class LinkMode { kSeparate, kLto };

struct JitOptions {
  std::string arch;  // "sm_90"; empty: see ResolveTargetArch
  LinkMode link_mode = LinkMode::kSeparate;
  int jobs = 0;  // parallel NVRTC compilations; 0: GPUOS_JOBS, else hardware threads
  ProgressMode progress = ProgressMode::kAuto;
  // When set, receives every event (calls are serialized, possibly from
  // compile threads) and nothing is printed.
  std::function<void(const BuildEvent&)> on_event;
};

struct BuildStats {
  std::string arch;
  int operators = 0;       // operators in the image
  int instantiations = 0;  // operator table entries (operator x dtype)
  int compiled = 0;        // NVRTC compilations run (operators, device sources, table)
  // Units whose object came from the cache: LTO-IR or, with kSeparate, a
  // relocatable cubin (the name predates separate compilation; tools/ uses it).
  int ltoir_cache_hits = 0;
  bool image_cache_hit = false;  // the cubin came from the cache: nothing compiled or linked
  bool linked = false;
  int cache_errors = 0;           // failed cache reads/writes (the build went on)
  std::string first_cache_error;  // message of the first of them
  double codegen_seconds = 0;     // generating sources and keys
  double compile_seconds = 0;     // wall time of the NVRTC stage
  double link_seconds = 0;
  double total_seconds = 0;
};

// Thread safety: Build and Compile are const and may run concurrently; the
// cache must allow concurrent calls (the BuildCache contract).
class JitBuilder {
 public:
  // `cache` may be null (nothing is reused); otherwise it must outlive the
  // builder.
  explicit JitBuilder(BuildCache* cache, JitOptions options = {});

  // The kernel image holding the worker and every dtype instantiation of
  // every operator in `ops` (two versions of one operator may both be
  // present). `stats`, when not null, receives what the build did.
  // Errors: InvalidArgument for an invalid spec, the same (name, version)
  // twice, or a bad arch; CompileError with the NVRTC log mapped to the pack
  // files ("ops.yaml:14: error: ...", operator named) or the nvJitLink log;
  // Unavailable when no arch can be determined or the toolkit headers are
  // missing and something must be compiled.
  Expected<KernelImage> Build(const std::vector<OperatorSpec>& ops,
                              BuildStats* stats = nullptr) const;

  // Compiles each operator's unit (cached) without the worker or a link:
  // the check a publish runs. Errors as Build.
  Status Compile(const std::vector<OperatorSpec>& ops, BuildStats* stats = nullptr) const;

  const JitOptions& options() const { return options_; }

 private:
  Expected<KernelImage> Run(const std::vector<OperatorSpec>& ops, bool link,
                            BuildStats* stats) const;

  BuildCache* cache_;
  JitOptions options_;
};

}  // namespace gpuos::registry
