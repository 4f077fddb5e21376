// The build service with the real NVRTC and nvJitLink (no GPU needed):
// architecture choice, the cache, error mapping, progress, link modes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "gpuos/cuda_driver.h"
#include "gpuos/registry/codegen.h"
#include "jit_test_util.h"
#include "temp_dir.h"
#include "toolchain.h"

namespace gpuos::registry {
namespace {

using testing::kSmallPackYaml;
using testing::ParseOperators;
using testing::ScopedEnv;
using testing::TestOptions;

TEST(JitBuilderTest, ToolchainIsDescribed) {
  const JitToolchain toolchain = DescribeJitToolchain();
  EXPECT_FALSE(toolchain.nvrtc_version.empty());
  EXPECT_NE(toolchain.nvrtc_version, "unknown");
  EXPECT_NE(toolchain.nvjitlink_version, "unknown");
  auto has = [&](const std::string& arch) {
    for (const std::string& a : toolchain.supported_archs) {
      if (a == arch) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("sm_80"));
  EXPECT_TRUE(has("sm_90"));
  EXPECT_FALSE(toolchain.toolkit_include_dir.empty()) << toolchain.toolkit_include_error;
  EXPECT_EQ(toolchain.runtime_abi_version, 13u);  // GPUOS_RUNTIME_ABI_VERSION
}

TEST(JitBuilderTest, UnknownArchIsAClearError) {
  for (const char* arch : {"sm_91", "sm_80a", "compute_90", "banana", "sm_"}) {
    auto resolved = ResolveTargetArch(arch);
    ASSERT_FALSE(resolved.ok()) << arch;
    EXPECT_EQ(resolved.status().code(), StatusCode::kInvalidArgument) << arch;
    EXPECT_NE(resolved.status().message().find(std::string("'") + arch + "'"), std::string::npos);
    EXPECT_NE(resolved.status().message().find("sm_<N> with N one of"), std::string::npos)
        << resolved.status().message();
    EXPECT_NE(resolved.status().message().find("--arch"), std::string::npos);
  }
  for (const char* arch : {"sm_80", "sm_90", "sm_90a", "sm_100f"}) {
    EXPECT_TRUE(ResolveTargetArch(arch).ok()) << arch;
  }
  JitBuilder builder(nullptr, TestOptions("sm_12"));
  EXPECT_EQ(builder.Build({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(JitBuilderTest, ArchComesFromEnvironmentThenGpu) {
  {
    ScopedEnv env("GPUOS_ARCH", "sm_80");
    auto arch = ResolveTargetArch("");
    ASSERT_TRUE(arch.ok()) << arch.status().ToString();
    EXPECT_EQ(*arch, "sm_80");
    EXPECT_EQ(*ResolveTargetArch("sm_90"), "sm_90");  // explicit beats environment
  }
  {
    ScopedEnv env("GPUOS_ARCH", "sm_9O");
    auto arch = ResolveTargetArch("");
    ASSERT_FALSE(arch.ok());
    EXPECT_NE(arch.status().message().find("GPUOS_ARCH"), std::string::npos);
  }
  ScopedEnv env("GPUOS_ARCH", nullptr);
  auto arch = ResolveTargetArch("");
  if (DetectGpuArch(0).ok()) {
    EXPECT_TRUE(arch.ok()) << arch.status().ToString();
  } else {
    ASSERT_FALSE(arch.ok());
    EXPECT_EQ(arch.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(arch.status().message().find("pass --arch"), std::string::npos);
    EXPECT_NE(arch.status().message().find("GPUOS_ARCH"), std::string::npos);
    EXPECT_NE(arch.status().message().find("no CUDA"), std::string::npos)
        << arch.status().message();
  }
}

TEST(JitBuilderTest, JitDefinesBecomeNvrtcOptionsAndBadEntriesAreLeftOut) {
  std::vector<std::string> without;
  {
    ScopedEnv env("GPUOS_JIT_DEFINES", nullptr);
    without = jit::NvrtcOptions("sm_90", LinkMode::kSeparate);
  }
  ScopedEnv env("GPUOS_JIT_DEFINES",
                " GPUOS_FEW_ROWS_ONE_ROW_UNROLL=4 1BAD -x FLAG GPUOS_OPERATOR_PRESERVE=16 "
                "GPUOS_PHASE_TIMING caf\xc3\xa9 A=b=c ");
  std::vector<std::string> expected = without;
  for (const char* define : {"-DGPUOS_FEW_ROWS_ONE_ROW_UNROLL=4", "-DFLAG", "-DA=b=c"}) {
    expected.push_back(define);
  }
  EXPECT_EQ(jit::NvrtcOptions("sm_90", LinkMode::kSeparate), expected);
}

// GPUOS_JIT_DUMP_DIR: every compiled unit's source and object land in the
// directory (created if missing), named after the unit; a directory that
// cannot be written leaves the build as it was.
TEST(JitBuilderTest, DumpDirReceivesEachUnitsSourceAndObject) {
  const auto ops = ParseOperators(kSmallPackYaml);
  const gpuos::testing::TempDir temp("gpuos-jit-dump");  // removed however the test ends
  const std::filesystem::path dir = temp.path();
  {
    ScopedEnv env("GPUOS_JIT_DUMP_DIR", (dir / "nested").c_str());
    JitBuilder builder(nullptr, TestOptions("sm_90"));
    BuildStats stats;
    ASSERT_TRUE(builder.Compile(ops, &stats).ok());
  }
  int sources = 0, objects = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "nested")) {
    const std::string ext = entry.path().extension().string();
    EXPECT_GT(entry.file_size(), 0u) << entry.path();
    sources += ext == ".cu";
    objects += ext == ".cubin" || ext == ".ltoir";
  }
  EXPECT_GE(sources, 2) << "one unit per operator at least";
  EXPECT_EQ(sources, objects);
  {
    // A linked image's device runtime units are named by their paths
    // ("device/src/queue_worker.cu"): their directories are made too.
    ScopedEnv env("GPUOS_JIT_DUMP_DIR", (dir / "linked").c_str());
    ASSERT_TRUE(JitBuilder(nullptr, TestOptions("sm_90")).Build({}).ok());
  }
  EXPECT_GT(std::filesystem::file_size(dir / "linked" / "device" / "src" / "queue_worker.cu"), 0u);
  EXPECT_GT(std::filesystem::file_size(dir / "linked" / "device" / "src" / "queue_worker.cubin"),
            0u);
  {
    ScopedEnv env("GPUOS_JIT_DUMP_DIR", "/proc/gpuos_cannot_write_here");
    JitBuilder builder(nullptr, TestOptions("sm_90"));
    BuildStats stats;
    EXPECT_TRUE(builder.Compile(ops, &stats).ok());
  }
}

TEST(JitBuilderTest, WarmRebuildHitsTheImageCacheAndCompilesNothing) {
  const auto ops = ParseOperators(kSmallPackYaml);
  InMemoryBuildCache cache;
  JitBuilder builder(&cache, TestOptions("sm_90"));
  BuildStats cold;
  auto first = builder.Build(ops, &cold);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->cubin.empty());
  EXPECT_EQ(first->arch, "sm_90");
  EXPECT_EQ(first->entries.size(), 3u);
  EXPECT_EQ(first->table_size, 4u);
  EXPECT_EQ(first->abi_version, 13u);  // GPUOS_RUNTIME_ABI_VERSION
  EXPECT_EQ(cold.operators, 2);
  EXPECT_EQ(cold.instantiations, 3);
  // Two operators, the device sources and the table.
  const int units = 2 + static_cast<int>(jit::DeviceRuntimeSources().size()) + 1;
  EXPECT_EQ(cold.compiled, units);
  EXPECT_EQ(cold.ltoir_cache_hits, 0);
  EXPECT_FALSE(cold.image_cache_hit);
  EXPECT_TRUE(cold.linked);
  EXPECT_EQ(cache.size(), static_cast<std::size_t>(units + 1));  // objects + image

  BuildStats warm;
  const auto start = std::chrono::steady_clock::now();
  auto second = builder.Build(ops, &warm);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(warm.compiled, 0);
  EXPECT_TRUE(warm.image_cache_hit);
  EXPECT_FALSE(warm.linked);
  EXPECT_LT(seconds, 0.05);
  EXPECT_LT(warm.total_seconds, 0.05);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->key, first->key);
  EXPECT_EQ(second->entries, first->entries);

  // Another order of the same operators is the same image.
  auto reversed = builder.Build({ops[1], ops[0]}, &warm);
  ASSERT_TRUE(reversed.ok());
  EXPECT_TRUE(warm.image_cache_hit);
  EXPECT_EQ(reversed->key, first->key);
  // Another architecture is not.
  JitBuilder other(&cache, TestOptions("sm_80"));
  auto sm80 = other.Build(ops, &warm);
  ASSERT_TRUE(sm80.ok()) << sm80.status().ToString();
  EXPECT_NE(sm80->key, first->key);
  EXPECT_EQ(warm.compiled, units);
}

TEST(JitBuilderTest, AddingAnOperatorCompilesOnlyItAndTheTable) {
  auto ops = ParseOperators(kSmallPackYaml);
  InMemoryBuildCache cache;
  JitBuilder builder(&cache, TestOptions("sm_90"));
  ASSERT_TRUE(builder.Build({ops[0]}).ok());
  BuildStats stats;
  auto image = builder.Build(ops, &stats);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(stats.compiled, 2);  // `total` and the operator table
  EXPECT_EQ(stats.ltoir_cache_hits, 1 + static_cast<int>(jit::DeviceRuntimeSources().size()));
  EXPECT_TRUE(stats.linked);
}

// A cache that fails every call, or returns entries of the wrong kind.
class BrokenCache final : public BuildCache {
 public:
  explicit BrokenCache(bool wrong_kind) : wrong_kind_(wrong_kind) {}
  Expected<std::optional<BuildArtifact>> Get(const std::string&) override {
    if (wrong_kind_) return std::optional<BuildArtifact>(BuildArtifact{"ltoir", "sm_90", "junk"});
    return IoError("disk on fire");
  }
  Status Put(const std::string&, const BuildArtifact&) override {
    ++puts;
    return wrong_kind_ ? Status::Ok() : IoError("disk on fire");
  }
  int puts = 0;

 private:
  bool wrong_kind_;
};

TEST(JitBuilderTest, CacheFailuresDoNotFailTheBuild) {
  const auto ops = ParseOperators(kSmallPackYaml);
  BrokenCache failing(/*wrong_kind=*/false);
  BuildStats stats;
  auto image = JitBuilder(&failing, TestOptions("sm_90")).Build(ops, &stats);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_GT(stats.cache_errors, 0);
  EXPECT_NE(stats.first_cache_error.find("disk on fire"), std::string::npos);

  // Entries of the wrong kind (or arch) are misses, never used.
  BrokenCache wrong(/*wrong_kind=*/true);
  auto rebuilt = JitBuilder(&wrong, TestOptions("sm_90")).Build(ops, &stats);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_EQ(stats.ltoir_cache_hits, 0);
  EXPECT_FALSE(stats.image_cache_hit);
  EXPECT_EQ(rebuilt->cubin, image->cubin);
  EXPECT_EQ(wrong.puts, stats.compiled + 1);
}

constexpr const char* kBrokenPack = R"(gpuos_pack: 1
name: test.broken
version: 1.0.0
operators:
  - name: fine
    version: 1.0.0
    kind: elementwise
    dtypes: [f32]
    inputs: [{name: a}]
    outputs: [{name: out}]
    body: |
      out = a;
  - name: broken
    version: 1.0.0
    kind: elementwise
    dtypes: [f32, f16]
    inputs: [{name: a}]
    outputs: [{name: out}]
    body: |
      const compute_t doubled = a * 2;
      out = doubled + ;
)";

TEST(JitBuilderTest, SyntaxErrorPointsAtTheYamlLineAndNamesTheOperator) {
  const auto ops = ParseOperators(kBrokenPack, "packs/broken.yaml");
  ASSERT_EQ(ops.size(), 2u);
  ASSERT_EQ(ops[1].body.location.line, 20);  // the body's first line
  InMemoryBuildCache cache;
  auto image = JitBuilder(&cache, TestOptions("sm_90")).Build(ops);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCompileError);
  const std::string message = image.status().message();
  EXPECT_NE(message.find("operator 'broken' 1.0.0 (packs/broken.yaml:"), std::string::npos)
      << message;
  EXPECT_NE(message.find("packs/broken.yaml:21: error: expected an expression"), std::string::npos)
      << message;
  EXPECT_NE(message.find("[T = f32, f16]"), std::string::npos) << message;
  EXPECT_NE(message.find("out = doubled + ;"), std::string::npos);
  EXPECT_EQ(message.find("'fine'"), std::string::npos);
  EXPECT_EQ(message.find("@T="), std::string::npos);
  EXPECT_EQ(message.find("errors detected"), std::string::npos);
}

TEST(JitBuilderTest, ErrorInDeviceCodePointsAtItsLine) {
  const auto ops = ParseOperators(R"(gpuos_pack: 1
name: test.helper
version: 1.0.0
operators:
  - name: helper
    version: 1.0.0
    kind: reduction
    dtypes: [f64]
    inputs: [{name: a}]
    outputs: [{name: out}]
    device_code: |
      __device__ inline double twice(double v) {
        return v * undefined_thing;
      }
    reduce:
      init: acc = 0;
      step: acc += twice(x);
      merge: acc += other;
)",
                                  "helper.yaml");
  auto image = JitBuilder(nullptr, TestOptions("sm_80")).Build(ops);
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find(
                "helper.yaml:13: error: identifier \"undefined_thing\" is undefined [T = f64]"),
            std::string::npos)
      << image.status().message();
}

TEST(JitBuilderTest, RefusesInvalidSpecsAndDuplicates) {
  auto ops = ParseOperators(kSmallPackYaml);
  auto twice = JitBuilder(nullptr, TestOptions("sm_90")).Build({ops[0], ops[0]});
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("appears twice"), std::string::npos);

  OperatorSpec invalid = ops[0];
  invalid.dtypes.clear();
  auto bad = JitBuilder(nullptr, TestOptions("sm_90")).Build({invalid});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("axpy"), std::string::npos);
}

TEST(JitBuilderTest, TwoVersionsOfOneOperatorShareAnImage) {
  auto ops = ParseOperators(kSmallPackYaml);
  OperatorSpec next = ops[0];
  next.version = SemVer{1, 1, 0};
  next.body.code = "out = alpha * a - b;\n";
  auto image = JitBuilder(nullptr, TestOptions("sm_90")).Build({next, ops[0]});
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  const ImageEntry* current = image->Find("axpy", SemVer{1, 1, 0}, DType::kF16);
  const ImageEntry* previous = image->Find("axpy", SemVer{1, 0, 0}, DType::kF16);
  ASSERT_NE(current, nullptr);
  ASSERT_NE(previous, nullptr);
  EXPECT_NE(current->slot, previous->slot);
  EXPECT_NE(current->symbol, previous->symbol);
  EXPECT_EQ(image->FindLatest("axpy", DType::kF16), current);
}

TEST(JitBuilderTest, ProgressEventsCountUpAndEndWithTheLink) {
  const auto ops = ParseOperators(kSmallPackYaml);
  JitOptions options = TestOptions("sm_90");
  options.jobs = 2;
  std::vector<BuildEvent> events;
  options.on_event = [&](const BuildEvent& event) { events.push_back(event); };
  BuildStats stats;
  ASSERT_TRUE(JitBuilder(nullptr, options).Build(ops, &stats).ok());
  ASSERT_EQ(events.size(), static_cast<std::size_t>(stats.compiled + 1));
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i].stage, BuildEvent::Stage::kCompile);
    EXPECT_EQ(events[i].done, static_cast<int>(i) + 1);
    EXPECT_EQ(events[i].total, stats.compiled);
  }
  EXPECT_EQ(events.back().stage, BuildEvent::Stage::kLink);
  EXPECT_NE(events.back().unit.find("2 operators"), std::string::npos);
}

TEST(JitBuilderTest, CompileOnlyChecksOperatorsWithoutLinking) {
  const auto ops = ParseOperators(kSmallPackYaml);
  BuildStats stats;
  ASSERT_TRUE(JitBuilder(nullptr, TestOptions("sm_80")).Compile(ops, &stats).ok());
  EXPECT_EQ(stats.compiled, 2);
  EXPECT_FALSE(stats.linked);
  const auto broken = ParseOperators(kBrokenPack, "broken.yaml");
  EXPECT_EQ(JitBuilder(nullptr, TestOptions("sm_80")).Compile(broken).code(),
            StatusCode::kCompileError);
}

TEST(JitBuilderTest, LtoModeLinksToo) {
  const auto ops = ParseOperators(kSmallPackYaml);
  JitOptions options = TestOptions("sm_90");
  options.link_mode = LinkMode::kLto;
  InMemoryBuildCache cache;
  BuildStats stats;
  auto lto = JitBuilder(&cache, options).Build(ops, &stats);
  ASSERT_TRUE(lto.ok()) << lto.status().ToString();
  EXPECT_TRUE(stats.linked);
  EXPECT_FALSE(lto->cubin.empty());
  auto separate = JitBuilder(&cache, TestOptions("sm_90")).Build(ops, &stats);
  ASSERT_TRUE(separate.ok());
  EXPECT_NE(separate->key, lto->key);
  EXPECT_FALSE(stats.image_cache_hit);
}

TEST(JitBuilderTest, EmptyImageHoldsOnlyTheWorker) {
  auto image = JitBuilder(nullptr, TestOptions("sm_90")).Build({});
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_TRUE(image->entries.empty());
  EXPECT_EQ(image->table_size, 1u);
  EXPECT_FALSE(image->cubin.empty());
}

// The worker's A/B switches (GPUOS_JIT_DEFINES) and the phase timing each
// give an image that compiles: a switch is only measured on the GPU machine,
// so a broken one would otherwise surface there first.
TEST(JitBuilderTest, WorkerCompilesWithEachOfItsSwitches) {
  struct Variant {
    const char* defines;
    const char* phase_timing;
  };
  // Five builds (about 8 s each here): the phase marks, the board path
  // alone (direct tiles off: docs/runtime.md, "Direct tiles") with them and
  // with quiet pollers that read the host's flags less often
  // (GPUOS_POLLER_QUIET_NS, GPUOS_POLLER_FLAGS_EVERY: queue_worker.cu), and
  // direct admissions that read the whole slot with direct tiles counted
  // after a fence and their tables left in device memory, as until session
  // 39 (GPUOS_SLOT_USED_WORDS=0, GPUOS_DIRECT_COUNT_ACQ_REL=0,
  // GPUOS_DIRECT_TABLE_IN_SHARED=0: queue_direct.cuh), with session 43's
  // idle-round stamps in the helpers' trace records (GPUOS_TRACE_IDLE_ROUNDS),
  // and session 44's help records stamped past the worker's barriers
  // (GPUOS_TRACE_IDLE_ROUNDS=3) and the other help-record stamps (=2 with the
  // phase marks, =4).
  for (const Variant& variant :
       {Variant{"", "1"},
        Variant{"GPUOS_DIRECT_TILES=0 GPUOS_POLLER_QUIET_NS=4000 GPUOS_POLLER_FLAGS_EVERY=8 "
                "GPUOS_TRACE_IDLE_ROUNDS=3",
                "1"},
        Variant{"GPUOS_SLOT_USED_WORDS=0 GPUOS_DIRECT_COUNT_ACQ_REL=0 "
                "GPUOS_DIRECT_TABLE_IN_SHARED=0 GPUOS_TRACE_IDLE_ROUNDS=1",
                nullptr},
        Variant{"GPUOS_TRACE_IDLE_ROUNDS=2", "1"}, Variant{"GPUOS_TRACE_IDLE_ROUNDS=4", nullptr}}) {
    ScopedEnv defines("GPUOS_JIT_DEFINES", variant.defines);
    ScopedEnv phase("GPUOS_PHASE_TIMING", variant.phase_timing);
    auto image = JitBuilder(nullptr, TestOptions("sm_90")).Build({});
    ASSERT_TRUE(image.ok()) << variant.defines << " (phase timing "
                            << (variant.phase_timing != nullptr ? "on" : "off")
                            << "): " << image.status().ToString();
    EXPECT_FALSE(image->cubin.empty());
  }
}

TEST(JitBuilderTest, NvrtcLogIsRewrittenForPeople) {
  const std::string log =
      "ops.yaml@T=f32(12): error: identifier \"q\" is undefined\n"
      "    out = q;\n"
      "          ^\n"
      "\n"
      "ops.yaml@T=f16(12): error: identifier \"q\" is undefined\n"
      "    out = q;\n"
      "          ^\n"
      "\n"
      "gpuos_op_1a_v1_0_0.cu@T=f16(30): warning: something generated\n"
      "\n"
      "2 errors detected in the compilation of \"gpuos_op_1a_v1_0_0.cu\".\n";
  const std::string rewritten = jit::RewriteNvrtcLog(log);
  EXPECT_EQ(rewritten,
            "ops.yaml:12: error: identifier \"q\" is undefined [T = f32, f16]\n"
            "    out = q;\n"
            "          ^\n"
            "gpuos_op_1a_v1_0_0.cu:30: warning: something generated [T = f16]");
  EXPECT_EQ(jit::RewriteNvrtcLog("nvrtc: error: invalid value for --gpu-architecture (-arch)\n"),
            "nvrtc: error: invalid value for --gpu-architecture (-arch)");
}

}  // namespace
}  // namespace gpuos::registry
