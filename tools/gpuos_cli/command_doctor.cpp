#include <unistd.h>

#include <filesystem>

#include "../cli_support/exit_codes.h"
#include "commands.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/environment.h"
#include "gpuos/registry/jit_builder.h"
#include "gpuos/registry/repository.h"

namespace gpuos::cli {
namespace {

int RunDoctor(const GpuosContext& ctx) {
  const Output out = ctx.out();
  nlohmann::json doc;
  doc["gpuos_version"] = GPUOS_VERSION;
  out.Line(std::string("gpuos ") + GPUOS_VERSION);

  auto tc = registry::DescribeJitToolchain();
  doc["toolchain"] = {{"nvrtc", tc.nvrtc_version},
                      {"nvjitlink", tc.nvjitlink_version},
                      {"archs", tc.supported_archs},
                      {"cuda_include", tc.toolkit_include_dir},
                      {"runtime_abi", tc.runtime_abi_version}};
  out.Line("NVRTC " + tc.nvrtc_version + ", nvJitLink " + tc.nvjitlink_version + ", runtime ABI " +
           std::to_string(tc.runtime_abi_version));
  out.Line("CUDA headers for device code: " + (tc.toolkit_include_dir.empty()
                                                   ? "NOT FOUND (" + tc.toolkit_include_error + ")"
                                                   : tc.toolkit_include_dir));

  auto count = CudaDeviceCount();
  if (!count.ok()) {
    out.Line("GPU: none (" + count.status().message() + ")");
    doc["gpus"] = nlohmann::json::array();
    doc["gpu_error"] = count.status().message();
  } else {
    nlohmann::json gpus = nlohmann::json::array();
    for (int i = 0; i < *count; ++i) {
      auto info = QueryCudaDevice(i);
      if (!info.ok()) {
        out.Line("GPU " + std::to_string(i) + ": " + info.status().message());
        continue;
      }
      out.Line("GPU " + std::to_string(i) + ": " + info->name + ", sm_" +
               std::to_string(info->compute_major) + std::to_string(info->compute_minor) + ", " +
               std::to_string(info->multiprocessors) + " SMs, " +
               std::to_string(info->total_memory >> 30) + " GiB, driver " +
               std::to_string(info->driver_version));
      gpus.push_back({{"name", info->name},
                      {"arch", "sm_" + std::to_string(info->compute_major) +
                                   std::to_string(info->compute_minor)},
                      {"sms", info->multiprocessors},
                      {"memory_bytes", info->total_memory},
                      {"driver", info->driver_version}});
    }
    doc["gpus"] = gpus;
  }

  bool healthy = !tc.toolkit_include_dir.empty();
  const std::string db = ctx.db.empty() ? DefaultRegistryPath() : ctx.db;
  doc["repository"] = {{"path", db}};
  std::error_code ec;
  if (!std::filesystem::exists(db, ec)) {
    out.Line("repository: " + db + " (does not exist yet)");
  } else {
    registry::RepositoryOptions options;
    options.path = db;
    options.read_only = true;
    options.create_if_missing = false;
    auto repo = registry::Repository::Open(options);
    if (!repo.ok()) {
      out.Line("repository: " + db + ": " + repo.status().message());
      doc["repository"]["error"] = repo.status().message();
      healthy = false;
    } else {
      auto ops = (*repo)->ListOperators();
      auto cache = (*repo)->CacheStats();
      const auto n_ops = ops.ok() ? ops->size() : 0;
      const auto n_cache = cache.ok() ? cache->entries : 0;
      out.Line("repository: " + db + " (schema " + std::to_string((*repo)->schema_version()) +
               ", " + std::to_string(n_ops) + " operators, " + std::to_string(n_cache) +
               " cached builds" + (::access(db.c_str(), W_OK) != 0 ? ", read-only" : "") + ")");
      doc["repository"]["schema"] = (*repo)->schema_version();
      doc["repository"]["operators"] = n_ops;
      doc["repository"]["cache_entries"] = n_cache;
    }
  }
  auto plugin_path = GetEnv("GPUOS_PLUGIN_PATH");
  out.Line("plugin path (GPUOS_PLUGIN_PATH): " + plugin_path.value_or("(not set)"));
  doc["plugin_path"] = plugin_path.value_or("");
  doc["healthy"] = healthy;
  out.Json(doc);
  // No GPU is not a problem here (doctor runs on build hosts too); missing
  // toolkit headers or an unusable repository are.
  return healthy ? kExitOk : kExitFailure;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, GpuosContext& ctx) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Report versions, GPUs, toolchain and repository. Exit code 1 when the CUDA headers "
      "NVRTC\nneeds are missing or the repository cannot be opened.");
  cmd->callback([&ctx] { ctx.exit_code = RunDoctor(ctx); });
}

}  // namespace gpuos::cli
