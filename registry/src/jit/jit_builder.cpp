#include "gpuos/registry/jit_builder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "codegen_internal.h"
#include "gpuos/content_hash.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/device/abi.h"
#include "gpuos/environment.h"
#include "gpuos/registry/codegen.h"
#include "progress.h"
#include "toolchain.h"

namespace gpuos::registry {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One NVRTC program of a build: an operator, the worker or the table.
struct Unit {
  std::string label;                   // for progress and messages
  const OperatorSpec* spec = nullptr;  // null for the worker and the table
  GeneratedSource source;
  std::string key;     // cache key of its object
  std::string object;  // relocatable cubin or LTO-IR
  bool cached = false;
  Status error;
};

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += part + " ";
  return out;
}

// Cache artifact kind of a unit's object.
const char* ObjectKind(LinkMode mode) { return mode == LinkMode::kLto ? "ltoir" : "cubin"; }

std::string UnitKey(const GeneratedSource& source, const std::string& arch, LinkMode mode) {
  ContentHasher hasher;
  hasher.Add("gpuos-unit/1")
      .Add(ObjectKind(mode))
      .Add(source.program_name)
      .Add(source.source)
      .Add(jit::DeviceSourcesDigest())
      .Add(Joined(jit::NvrtcOptions(arch, mode)))
      .Add(arch)
      .Add("nvrtc " + jit::NvrtcVersion())
      .Add("abi " + std::to_string(device::kRuntimeAbiVersion));
  return hasher.Finish();
}

std::string ImageKey(const std::vector<Unit>& units, const std::string& arch, LinkMode mode) {
  ContentHasher hasher;
  hasher.Add("gpuos-image/1")
      .Add(arch)
      .Add(Joined(jit::NvJitLinkOptions(arch, mode)))
      .Add("nvjitlink " + jit::NvJitLinkVersion())
      .Add("nvrtc " + jit::NvrtcVersion())
      .Add("abi " + std::to_string(device::kRuntimeAbiVersion));
  for (const Unit& unit : units) hasher.Add(unit.key);
  return hasher.Finish();
}

int JobCount(const JitOptions& options) {
  if (options.jobs > 0) return options.jobs;
  if (auto jobs = GetEnv("GPUOS_JOBS")) {
    try {
      const int value = std::stoi(*jobs);
      if (value > 0) return value;
    } catch (...) {  // not a number: fall through to the default
    }
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Runs fn(i) for i in [0, count) on up to `jobs` threads.
template <typename Fn>
void ParallelFor(int count, int jobs, Fn fn) {
  jobs = std::min(jobs, count);
  if (jobs <= 1) {
    for (int i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < jobs; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < count; i = next++) fn(i);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// Cache access that never fails a build: errors are counted and remembered.
class CacheAccess {
 public:
  CacheAccess(BuildCache* cache, BuildStats& stats) : cache_(cache), stats_(stats) {}

  std::optional<std::string> Get(const std::string& key, const std::string& kind,
                                 const std::string& arch) {
    if (cache_ == nullptr) return std::nullopt;
    auto found = cache_->Get(key);
    if (!found.ok()) {
      Note(found.status());
      return std::nullopt;
    }
    if (!found->has_value() || (*found)->kind != kind || (*found)->arch != arch ||
        (*found)->bytes.empty()) {
      return std::nullopt;
    }
    return std::move((*found)->bytes);
  }

  void Put(const std::string& key, const std::string& kind, const std::string& arch,
           const std::string& bytes) {
    if (cache_ == nullptr) return;
    Status status = cache_->Put(key, BuildArtifact{kind, arch, bytes});
    if (!status.ok()) Note(status);
  }

 private:
  void Note(const Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stats_.cache_errors++ == 0) stats_.first_cache_error = status.ToString();
  }

  BuildCache* cache_;
  BuildStats& stats_;
  std::mutex mutex_;
};

std::string DescribeFailure(const Unit& unit, const std::string& arch) {
  const std::string toolchain = "NVRTC " + jit::NvrtcVersion();
  if (unit.spec != nullptr) {
    return jit::DescribeOperator(*unit.spec) + " does not compile for " + arch + " (" + toolchain +
           "):\n" + unit.error.message();
  }
  return "gpuos's " + unit.label + " does not compile for " + arch + " (" + toolchain +
         "); this is a bug in gpuos:\n" + unit.error.message();
}

}  // namespace

JitToolchain DescribeJitToolchain() {
  JitToolchain toolchain;
  toolchain.nvrtc_version = jit::NvrtcVersion();
  toolchain.nvjitlink_version = jit::NvJitLinkVersion();
  for (int number : jit::SupportedArchNumbers()) {
    toolchain.supported_archs.push_back("sm_" + std::to_string(number));
  }
  auto include_dir = jit::ToolkitIncludeDir();
  if (include_dir.ok()) {
    toolchain.toolkit_include_dir = *include_dir;
  } else {
    toolchain.toolkit_include_error = include_dir.status().message();
  }
  toolchain.runtime_abi_version = device::kRuntimeAbiVersion;
  return toolchain;
}

Expected<std::string> ResolveTargetArch(const std::string& requested) {
  if (!requested.empty()) {
    GPUOS_RETURN_IF_ERROR(jit::CheckArch(requested));
    return requested;
  }
  if (auto from_env = GetEnv("GPUOS_ARCH")) {
    GPUOS_RETURN_IF_ERROR(jit::CheckArch(*from_env).WithContext("GPUOS_ARCH"));
    return *from_env;
  }
  auto detected = DetectGpuArch(0);
  if (!detected.ok()) {
    return Unavailable(
        "no target architecture: pass --arch (e.g. --arch sm_90) or set GPUOS_ARCH; detecting "
        "the GPU failed: " +
        detected.status().message());
  }
  GPUOS_RETURN_IF_ERROR(jit::CheckArch(*detected).WithContext("the GPU's architecture"));
  return *detected;
}

JitBuilder::JitBuilder(BuildCache* cache, JitOptions options)
    : cache_(cache), options_(std::move(options)) {}

Expected<KernelImage> JitBuilder::Build(const std::vector<OperatorSpec>& ops,
                                        BuildStats* stats) const {
  return Run(ops, /*link=*/true, stats);
}

Status JitBuilder::Compile(const std::vector<OperatorSpec>& ops, BuildStats* stats) const {
  return Run(ops, /*link=*/false, stats).status();
}

Expected<KernelImage> JitBuilder::Run(const std::vector<OperatorSpec>& ops, bool link,
                                      BuildStats* stats_out) const {
  const Clock::time_point start = Clock::now();
  BuildStats local_stats;
  BuildStats& stats = stats_out != nullptr ? *stats_out : local_stats;
  stats = BuildStats{};
  GPUOS_ASSIGN_OR_RETURN(const std::string arch, ResolveTargetArch(options_.arch));
  stats.arch = arch;

  std::vector<const OperatorSpec*> sorted;
  std::set<std::pair<std::string, SemVer>> seen;
  for (const OperatorSpec& spec : ops) {
    GPUOS_RETURN_IF_ERROR(ValidateOperator(spec).WithContext(jit::DescribeOperator(spec)));
    if (!seen.insert({spec.name, spec.version}).second) {
      return InvalidArgument(jit::DescribeOperator(spec) +
                             " appears twice in one image; pass each version once");
    }
    sorted.push_back(&spec);
  }
  std::sort(sorted.begin(), sorted.end(), [](const OperatorSpec* a, const OperatorSpec* b) {
    return a->name != b->name ? a->name < b->name : a->version < b->version;
  });

  std::vector<Unit> units;
  if (link) {
    for (const GeneratedSource& source : jit::DeviceRuntimeSources()) {
      units.push_back(Unit{source.program_name, nullptr, source});
    }
  }
  for (const OperatorSpec* spec : sorted) {
    GPUOS_ASSIGN_OR_RETURN(GeneratedSource source, GenerateOperatorSource(*spec));
    units.push_back(Unit{spec->name + " " + spec->version.ToString(), spec, std::move(source)});
  }
  KernelImage image;
  image.arch = arch;
  image.entries = AssignImageSlots(sorted);
  image.table_size = static_cast<std::uint32_t>(image.entries.size() + 1);
  image.abi_version = device::kRuntimeAbiVersion;
  if (link) units.push_back(Unit{"operator table", nullptr, GenerateOpTableSource(image.entries)});
  const LinkMode mode = options_.link_mode;
  for (Unit& unit : units) unit.key = UnitKey(unit.source, arch, mode);
  image.key = ImageKey(units, arch, mode);
  stats.operators = static_cast<int>(sorted.size());
  stats.instantiations = static_cast<int>(image.entries.size());
  stats.codegen_seconds = SecondsSince(start);

  CacheAccess cache(cache_, stats);
  if (link) {
    if (auto cubin = cache.Get(image.key, "cubin", arch)) {
      image.cubin = std::move(*cubin);
      stats.image_cache_hit = true;
      stats.total_seconds = SecondsSince(start);
      return image;
    }
  }

  std::vector<Unit*> todo;
  for (Unit& unit : units) {
    if (auto object = cache.Get(unit.key, ObjectKind(mode), arch)) {
      unit.object = std::move(*object);
      unit.cached = true;
      ++stats.ltoir_cache_hits;
    } else {
      todo.push_back(&unit);
    }
  }
  const Clock::time_point compile_start = Clock::now();
  jit::ProgressReporter progress(options_, arch, static_cast<int>(todo.size()));
  if (!todo.empty()) GPUOS_RETURN_IF_ERROR(jit::ToolkitIncludeDir().status());
  ParallelFor(static_cast<int>(todo.size()), JobCount(options_), [&](int i) {
    Unit& unit = *todo[static_cast<std::size_t>(i)];
    const Clock::time_point unit_start = Clock::now();
    auto object = jit::CompileUnit(unit.source, arch, mode);
    if (object.ok()) {
      unit.object = std::move(object).value();
      cache.Put(unit.key, ObjectKind(mode), arch, unit.object);
    } else {
      unit.error = object.status();
    }
    BuildEvent event;
    event.unit = unit.label;
    event.failed = !unit.error.ok();
    event.seconds = SecondsSince(unit_start);
    progress.Report(std::move(event));
  });
  stats.compiled = static_cast<int>(todo.size());
  stats.compile_seconds = SecondsSince(compile_start);

  std::string failures;
  for (const Unit* unit : todo) {
    if (unit->error.ok()) continue;
    if (unit->error.code() != StatusCode::kCompileError) return unit->error;
    failures += (failures.empty() ? "" : "\n\n") + DescribeFailure(*unit, arch);
  }
  if (!failures.empty()) return CompileError(failures);
  if (!link) {
    stats.total_seconds = SecondsSince(start);
    return image;
  }

  const Clock::time_point link_start = Clock::now();
  progress.StartLink(static_cast<int>(units.size()));
  std::vector<jit::LinkInput> inputs;
  for (const Unit& unit : units) inputs.push_back({unit.source.program_name, unit.object});
  GPUOS_ASSIGN_OR_RETURN(image.cubin, jit::LinkCubin(inputs, arch, mode));
  stats.linked = true;
  stats.link_seconds = SecondsSince(link_start);
  cache.Put(image.key, "cubin", arch, image.cubin);
  BuildEvent linked;
  linked.stage = BuildEvent::Stage::kLink;
  linked.unit = "image (" + std::to_string(sorted.size()) + " operators, " +
                std::to_string(image.entries.size()) + " slots)";
  linked.seconds = stats.link_seconds;
  progress.Report(std::move(linked));
  stats.total_seconds = SecondsSince(start);
  return image;
}

}  // namespace gpuos::registry
