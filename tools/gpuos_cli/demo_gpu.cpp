#include "demo_gpu.h"

#include <cstdio>
#include <optional>
#include <string>

#include "demo_compare.h"
#include "gpuos/cuda_driver.h"
#include "gpuos/environment.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::cli {
namespace {

std::string Row(const std::string& workload, const std::string& variant, const std::string& a,
                const std::string& b, const std::string& c, const std::string& d) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "   %-22s %-12s %10s %10s %10s  %s", workload.c_str(),
                variant.c_str(), a.c_str(), b.c_str(), c.c_str(), d.c_str());
  return buf;
}

std::string Us(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

}  // namespace

Expected<std::string> DescribeGpu() {
  GPUOS_ASSIGN_OR_RETURN(auto info, QueryCudaDevice(0));
  return info.name + " (sm_" + std::to_string(info.compute_major) +
         std::to_string(info.compute_minor) + ", " + std::to_string(info.multiprocessors) +
         " SMs, driver " + std::to_string(info.driver_version) + ")";
}

Expected<nlohmann::json> RunDemoOnGpu(const registry::KernelImage& image,
                                      const std::vector<registry::OperatorSpec>& ops,
                                      const std::string& repository_path, const Output& out) {
  runtime::RuntimeConfig config;
  config.repository_path = repository_path;
  config.operators = ops;
  config.control_socket = "off";  // the live-update part opens the repository's runtime
  // A diagnostic: the comparison's task timeline as a Chrome trace.
  const std::optional<std::string> trace_path = GetEnv("GPUOS_DEMO_TRACE");
  if (trace_path) config.trace_capacity = 1u << 19;
  out.Line("== starting the persistent runtime");
  GPUOS_ASSIGN_OR_RETURN(auto rt, runtime::Runtime::Open(config));

  std::vector<Workload> workloads = {MakeChain100(), MakeMlp(8, 256)};
  nlohmann::json cases = nlohmann::json::array();
  bool all_correct = true;
  out.Line(
      "== same operator code, plain kernel launches vs the persistent runtime (wall clock "
      "per run, submit to completion observed by the host)");
  out.Line(Row("workload", "variant", "median_us", "p10_us", "p90_us", "correct (max |err|)"));
  for (const auto& w : workloads) {
    GPUOS_ASSIGN_OR_RETURN(auto results, CompareWorkload(w, image, ops, *rt));
    for (const auto& r : results) {
      char err[64];
      std::snprintf(err, sizeof(err), "%s (%.2g)", r.correct ? "yes" : "NO", r.max_abs_error);
      out.Line(Row(r.workload, r.variant, Us(r.median_us), Us(r.p10_us), Us(r.p90_us), err));
      all_correct = all_correct && r.correct;
      cases.push_back({{"workload", r.workload},
                       {"description", w.description},
                       {"variant", r.variant},
                       {"median_us", r.median_us},
                       {"p10_us", r.p10_us},
                       {"p90_us", r.p90_us},
                       {"iterations", r.iterations},
                       {"correct", r.correct},
                       {"max_abs_error", r.max_abs_error}});
    }
  }
  if (trace_path) {
    GPUOS_RETURN_IF_ERROR(rt->Synchronize());
    GPUOS_RETURN_IF_ERROR(rt->ExportChromeTrace(*trace_path));
    out.Line("   task timeline written to " + *trace_path);
  }
  const auto stats = rt->stats();
  out.Line("   runtime: " + std::to_string(stats.submissions) + " submissions, " +
           std::to_string(stats.tasks_submitted) + " tasks, " + std::to_string(stats.launches) +
           " worker launches, " + std::to_string(stats.parks) + " parks, " +
           std::to_string(stats.worker_blocks) + " blocks");
  GPUOS_RETURN_IF_ERROR(rt->Shutdown());
  nlohmann::json doc = {{"ran", true},
                        {"device", rt->device_name()},
                        {"cases", cases},
                        {"correct", all_correct},
                        {"runtime",
                         {{"submissions", stats.submissions},
                          {"tasks", stats.tasks_submitted},
                          {"launches", stats.launches},
                          {"parks", stats.parks},
                          {"blocks", stats.worker_blocks}}}};
  if (!all_correct) return Internal("GPU results differ from the CPU reference (table above)");
  return doc;
}

}  // namespace gpuos::cli
