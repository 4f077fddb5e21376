// gpuos demo: the main job on the embedded defaults.
#include <chrono>

#include "../cli_support/builtin_packs.h"
#include "../cli_support/exit_codes.h"
#include "commands.h"
#include "demo_gpu.h"
#include "demo_live.h"
#include "gpuos/environment.h"
#include "gpuos/registry/jit_builder.h"
#include "gpuos/registry/repository.h"

namespace gpuos::cli {
namespace {

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string Fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

int RunDemo(const std::string& arch_option, const GpuosContext& ctx) {
  const Output out = ctx.out();
  nlohmann::json doc;

  // 1. The repository, with the built-in packs published.
  registry::RepositoryOptions repo_options;
  repo_options.path = ctx.db.empty() ? DefaultRegistryPath() : ctx.db;
  auto repo = registry::Repository::Open(repo_options);
  if (!repo.ok()) return out.Fail(repo.status());
  out.Line("== repository " + (*repo)->path());
  auto packs = LoadBuiltinPacks();
  if (!packs.ok()) return out.Fail(packs.status());
  nlohmann::json published = nlohmann::json::array();
  for (const auto& pack : *packs) {
    auto r = (*repo)->Publish(pack);
    if (!r.ok()) return out.Fail(r.status().WithContext("publishing built-in pack " + pack.name));
    out.Line("   " + pack.name + " " + pack.version.ToString() + ": " +
             std::to_string(pack.operators.size()) + " operators, " +
             (r->already_published ? "already published" : "published now"));
    published.push_back({{"pack", pack.name},
                         {"version", pack.version.ToString()},
                         {"operators", pack.operators.size()},
                         {"already_published", r->already_published}});
  }
  doc["repository"] = {{"path", (*repo)->path()}, {"packs", published}};

  // 2. The target: the GPU's architecture, else sm_90 (and say why).
  std::string arch = arch_option;
  std::string gpu_problem;
  auto detected = registry::ResolveTargetArch(arch_option);
  if (detected.ok()) {
    arch = *detected;
  } else if (arch_option.empty()) {
    gpu_problem = detected.status().message();
    arch = "sm_90";
  } else {
    return out.Fail(detected.status());
  }
  auto gpu = DescribeGpu();
  if (!gpu.ok()) gpu_problem = gpu.status().message();
  out.Line(gpu.ok() ? "== GPU: " + *gpu : "== no GPU found: " + gpu.status().message());

  // 3. The kernel image of every current and previous operator version.
  auto set = (*repo)->CurrentOperatorSet();
  if (!set.ok()) return out.Fail(set.status());
  std::vector<registry::OperatorSpec> ops;
  for (const auto& op : *set) {
    ops.push_back(op.current);
    if (op.previous) ops.push_back(*op.previous);
  }
  registry::JitOptions jit_options;
  jit_options.arch = arch;
  jit_options.progress = ctx.json ? registry::ProgressMode::kQuiet : registry::ProgressMode::kAuto;
  registry::JitBuilder builder(repo->get(), jit_options);
  registry::BuildStats first_stats, warm_stats;
  out.Line("== kernel image for " + arch + " (" + std::to_string(ops.size()) +
           " operator versions)");
  auto t0 = std::chrono::steady_clock::now();
  auto image = builder.Build(ops, &first_stats);
  auto t1 = std::chrono::steady_clock::now();
  if (!image.ok()) return out.Fail(image.status());
  auto again = builder.Build(ops, &warm_stats);
  auto t2 = std::chrono::steady_clock::now();
  if (!again.ok()) return out.Fail(again.status());
  out.Line("   first build: " + Fixed(Ms(t1 - t0)) + " ms (" +
           (first_stats.image_cache_hit
                ? std::string("image from the repository's cache")
                : std::to_string(first_stats.compiled) + " compiled, " +
                      std::to_string(first_stats.ltoir_cache_hits) + " from cache, linked") +
           "); " + std::to_string(image->entries.size()) + " table entries, " +
           std::to_string(image->cubin.size() / 1024) + " KiB cubin");
  out.Line("   same image again: " + Fixed(Ms(t2 - t1), 2) + " ms (" +
           (warm_stats.image_cache_hit ? "cache hit" : "rebuilt") + ")");
  doc["image"] = {{"arch", arch},
                  {"operator_versions", ops.size()},
                  {"entries", image->entries.size()},
                  {"cubin_bytes", image->cubin.size()},
                  {"first_build_ms", Ms(t1 - t0)},
                  {"first_build_cache_hit", first_stats.image_cache_hit},
                  {"compiled", first_stats.compiled},
                  {"warm_build_ms", Ms(t2 - t1)},
                  {"warm_build_cache_hit", warm_stats.image_cache_hit}};

  // 4. On a GPU: run the image and check it against the CPU.
  if (!gpu_problem.empty()) {
    out.Line("== GPU run skipped (no GPU, see above)");
    out.Line(
        "   everything that needs no GPU was done; run `gpuos demo` on a GPU machine for the rest");
    doc["gpu"] = {{"ran", false}, {"reason", gpu_problem}};
    out.Json(doc);
    return kExitOk;
  }
  auto run = RunDemoOnGpu(*image, ops, (*repo)->path(), out);
  if (!run.ok()) return out.Fail(run.status());
  doc["gpu"] = *run;
  // 5. Live update: publish and roll back while a workload runs.
  auto live = RunLiveUpdateDemo((*repo)->path(), out);
  if (!live.ok()) return out.Fail(live.status().WithContext("live update"));
  doc["live_update"] = *live;
  out.Json(doc);
  return kExitOk;
}

}  // namespace

void AddDemoCommand(CLI::App& app, GpuosContext& ctx) {
  auto arch = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "demo",
      "Publish the built-in packs into the repository, build (or load from the cache) the\n"
      "kernel image, and on a GPU run it and check the results against the CPU.");
  cmd->add_option("--arch", *arch, "architecture (default: the GPU's, else sm_90)");
  cmd->callback([arch, &ctx] { ctx.exit_code = RunDemo(*arch, ctx); });
}

}  // namespace gpuos::cli
