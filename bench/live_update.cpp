// Live-update benchmarks (bench/README.md, docs/live-update.md):
//
//   epoch_switch    the service gap seen by a workload that submits
//                   continuously while the kernel image is switched
//                   (median_us, p99_us over the switches);
//   alias_rollback  from Activate(previous version) to the host seeing the
//                   first task that ran on it complete (worker running; the
//                   result is read and checked afterwards, untimed);
//   publish_to_live from `gpuos-registry publish` (a child process, which
//                   notifies the runtime over its control socket) to the
//                   first task on the new version: cold (new operator code,
//                   compiled) and warm (a version whose code is in the build
//                   cache, only linked).
//
//   gpuos_bench_live OUT.json GPUOS_REGISTRY_BINARY [switches]
//
// Every timed result is checked: the probe's output tells which version ran.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "../tests/core/live_probe.h"
#include "../tests/core/runtime_test_util.h"
#include "bench_util.h"
#include "gpuos/registry/repository.h"

namespace gpuos::runtime {
namespace {

using bench::Clock;
using bench::MicrosecondsSince;
using bench::Samples;
using registry::SemVer;

registry::OperatorSpec Probe(std::uint32_t minor) {
  auto pack = testing::ProbePack(minor);
  GPUOS_BENCH_CHECK(pack);
  return pack->operators.at(0);
}

// One in-place probe task on `y`; waits for it.
void ProbeRun(Runtime& runtime, const testing::DeviceTensor& y) {
  TaskGraph graph(runtime);
  GPUOS_BENCH_CHECK(graph.Add("probe", DType::kF32, {y.desc, y.desc}));
  auto future = runtime.Submit(graph);
  GPUOS_BENCH_CHECK(future);
  GPUOS_BENCH_CHECK(future->Wait());
}

float Read(Runtime& runtime, const testing::DeviceTensor& y) {
  float value = 0;
  GPUOS_BENCH_CHECK(runtime.CopyToHost(&value, y.buffer.address, sizeof(value)));
  return value;
}

// ProbeRun, then y[0].
float ProbeOnce(Runtime& runtime, const testing::DeviceTensor& y) {
  ProbeRun(runtime, y);
  return Read(runtime, y);
}

nlohmann::json Case(const std::string& workload, const std::string& variant, const Samples& s,
                    bool correct, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json c = {{"workload", workload},
                      {"variant", variant},
                      {"median_us", s.Percentile(0.5)},
                      {"p10_us", s.Percentile(0.1)},
                      {"p90_us", s.Percentile(0.9)},
                      {"p99_us", s.Percentile(0.99)},
                      {"iterations", s.us.size()},
                      {"correct", correct},
                      {"unit", "us"}};
  c.update(extra);
  std::printf("%-16s %-14s median %9.1f us  p99 %9.1f us  (%zu)  %s\n", workload.c_str(),
              variant.c_str(), s.Percentile(0.5), s.Percentile(0.99), s.us.size(),
              correct ? "correct" : "WRONG");
  return c;
}

std::unique_ptr<Runtime> OpenOrExit(RuntimeConfig config) {
  auto runtime = Runtime::Open(config);
  if (!runtime.ok()) {
    std::fprintf(stderr, "live-update benchmark: %s\n", runtime.status().ToString().c_str());
    std::exit(runtime.status().message().rfind("no CUDA", 0) == 0 ? 0 : 1);
  }
  return std::move(runtime).value();
}

// epoch_switch: a thread submits one probe task after another and records
// when each finished; the main thread switches images `switches` times. The
// gap of a switch is the longest interval between two completions that
// overlaps it.
nlohmann::json EpochSwitch(int switches) {
  RuntimeConfig config;
  config.operators = {Probe(0), Probe(1)};
  config.repository_path = std::string(GPUOS_BINARY_DIR) + "/bench_live_cache.db";
  config.control_socket = "off";
  auto runtime = OpenOrExit(config);
  auto y = testing::Upload(*runtime, std::vector<float>(256, 0.0f));
  GPUOS_BENCH_CHECK(y);
  // Both images once, so the timed switches take them from the build cache.
  GPUOS_BENCH_CHECK(runtime->Update({LiveOperator{Probe(2), Probe(1)}}));
  GPUOS_BENCH_CHECK(runtime->Update({LiveOperator{Probe(0), Probe(1)}}));

  std::atomic<bool> stop{false};
  std::atomic<bool> wrong{false};
  std::vector<Clock::time_point> completions;
  completions.reserve(1 << 20);
  std::thread load([&] {
    float last = 0;
    while (!stop) {
      const float value = ProbeOnce(*runtime, *y);
      // The switches alternate 1.0.0 and 1.2.0: every step adds one of theirs.
      const float step = value - last;
      if (step != testing::ProbeIncrement(0) && step != testing::ProbeIncrement(2)) wrong = true;
      last = value;
      completions.push_back(Clock::now());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<std::pair<Clock::time_point, Clock::time_point>> windows;
  Samples runtime_gap, quiesce, load_step, commit;  // the runtime's own timing of the steps
  std::map<std::string, Samples> detail;            // and of their parts
  for (int i = 0; i < switches; ++i) {
    const std::uint32_t next = i % 2 == 0 ? 2 : 0;
    const Clock::time_point t0 = Clock::now();
    auto outcome = runtime->Update({LiveOperator{Probe(next), Probe(1)}});
    const Clock::time_point t1 = Clock::now();
    GPUOS_BENCH_CHECK(outcome);
    if (outcome->action != "epoch_switch") wrong = true;
    windows.emplace_back(t0, t1);
    runtime_gap.us.push_back(outcome->gap_us);
    quiesce.us.push_back(outcome->quiesce_us);
    load_step.us.push_back(outcome->load_us);
    commit.us.push_back(outcome->commit_us);
    for (const auto& [step, us] : outcome->gap_detail_us) detail[step].us.push_back(us);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  load.join();
  Samples gaps;
  for (const auto& [t0, t1] : windows) {
    double worst = 0;
    for (std::size_t k = 1; k < completions.size(); ++k) {
      if (completions[k] < t0 || completions[k - 1] > t1) continue;
      worst = std::max(
          worst,
          std::chrono::duration<double, std::micro>(completions[k] - completions[k - 1]).count());
    }
    gaps.us.push_back(worst);
  }
  Samples steady;  // intervals far from any switch: the workload's own pace
  for (std::size_t k = 1; k < completions.size(); k += 7) {
    steady.us.push_back(
        std::chrono::duration<double, std::micro>(completions[k] - completions[k - 1]).count());
  }
  nlohmann::json parts = nlohmann::json::object();  // median of each part of the gap
  for (const auto& [step, samples] : detail) {
    parts[step] = samples.Percentile(0.5);
    std::printf("  gap part %-16s median %8.1f us  p99 %8.1f us\n", step.c_str(),
                samples.Percentile(0.5), samples.Percentile(0.99));
  }
  return Case("epoch_switch", "gpuos", gaps, !wrong,
              {{"quiesce_to_resume_median_us", runtime_gap.Percentile(0.5)},
               {"gap_parts_median_us", parts},
               {"quiesce_to_resume_p99_us", runtime_gap.Percentile(0.99)},
               {"step_quiesce_median_us", quiesce.Percentile(0.5)},
               {"step_load_median_us", load_step.Percentile(0.5)},
               {"step_commit_resume_median_us", commit.Percentile(0.5)},
               {"workload_interval_median_us", steady.Percentile(0.5)},
               {"tasks_completed", completions.size()}});
}

// alias_rollback: flip back and forth; time Activate + the first task on it.
nlohmann::json AliasRollback(int rounds) {
  RuntimeConfig config;
  config.operators = {Probe(0), Probe(1)};
  config.repository_path = std::string(GPUOS_BINARY_DIR) + "/bench_live_cache.db";
  config.control_socket = "off";
  config.idle_park = std::chrono::milliseconds(50);  // "worker running"
  auto runtime = OpenOrExit(config);
  auto y = testing::Upload(*runtime, std::vector<float>(256, 0.0f));
  GPUOS_BENCH_CHECK(y);
  bool correct = true;
  Samples s;
  float value = ProbeOnce(*runtime, *y);  // 1.1.0 active: warms the worker
  for (int i = 0; i < rounds; ++i) {
    const std::uint32_t target = i % 2 == 0 ? 0 : 1;
    const Clock::time_point t0 = Clock::now();
    GPUOS_BENCH_CHECK(runtime->Activate("probe", {1, target, 0}));
    ProbeRun(*runtime, *y);  // the first task on that version, done
    s.us.push_back(MicrosecondsSince(t0));
    const float next = Read(*runtime, *y);
    correct = correct && next - value == testing::ProbeIncrement(target);
    value = next;
  }
  return Case("alias_rollback", "gpuos", s, correct);
}

// Runs `registry --db repo publish file` and waits for it.
bool RunPublish(const std::string& registry, const std::string& repo, const std::string& file) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 1);
    ::execl(registry.c_str(), registry.c_str(), "--db", repo.c_str(), "publish", file.c_str(),
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

nlohmann::json PublishToLive(const std::string& registry, int rounds) {
  const std::filesystem::path dir = std::filesystem::path(GPUOS_BINARY_DIR) / "bench_live_repo";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string repo = (dir / "registry.db").string();
  int packs = 0;  // every publish is a new pack version
  // One file per operator version: the compiled code is cached under the
  // operator's source location too (its #line), so publishing a version
  // again from the same file is what finds it in the build cache.
  auto write_pack = [&](std::uint32_t minor) {
    const std::string file = (dir / ("probe_v" + std::to_string(minor) + ".yaml")).string();
    std::ofstream(file) << testing::ProbeYaml(minor, "", "2." + std::to_string(packs++) + ".0");
    return file;
  };
  if (!RunPublish(registry, repo, write_pack(0))) {
    std::fprintf(stderr, "publish_to_live: the first publish failed\n");
    std::exit(1);
  }
  RuntimeConfig config;
  config.repository_path = repo;
  auto runtime = OpenOrExit(config);
  auto y = testing::Upload(*runtime, std::vector<float>(256, 0.0f));
  GPUOS_BENCH_CHECK(y);
  bool correct = true;
  Samples cold, warm;
  float value = ProbeOnce(*runtime, *y);
  // Cold: versions 1.1.0, 1.2.0, ... are new code (compiled by the publish
  // and linked by the runtime). Warm: then publish again an older version
  // that the active image lacks (its code is in the build cache: the runtime
  // only links a new image).
  auto publish_and_probe = [&](std::uint32_t minor, Samples& samples) {
    const std::string file = write_pack(minor);
    const Clock::time_point t0 = Clock::now();
    if (!RunPublish(registry, repo, file)) {
      std::fprintf(stderr, "publish_to_live: publishing %s failed\n", file.c_str());
      std::exit(1);
    }
    const float next = ProbeOnce(*runtime, *y);
    samples.us.push_back(MicrosecondsSince(t0));
    correct = correct && next - value == testing::ProbeIncrement(minor);
    value = next;
  };
  for (int i = 1; i <= rounds; ++i) {
    publish_and_probe(static_cast<std::uint32_t>(i), cold);
    std::vector<SemVer> in_image;
    for (const auto& op : runtime->ActiveOperators()) {
      if (op.name == "probe") in_image = op.in_image;
    }
    for (int older = i - 1; older >= 0; --older) {
      const SemVer v{1, static_cast<std::uint32_t>(older), 0};
      if (std::find(in_image.begin(), in_image.end(), v) != in_image.end()) continue;
      publish_and_probe(static_cast<std::uint32_t>(older), warm);
      break;
    }
  }
  nlohmann::json both = nlohmann::json::array();
  both.push_back(Case("publish_to_live", "gpuos_cold_cache", cold, correct));
  both.push_back(Case("publish_to_live", "gpuos_warm_cache", warm, correct));
  return both;
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gpuos_bench_live OUT.json GPUOS_REGISTRY_BINARY [switches]\n");
    return 2;
  }
  const int switches = argc > 3 ? std::atoi(argv[3]) : 200;
  nlohmann::json doc;
  doc["cuda_headers"] = bench::CudaHeadersVersion();
  doc["cases"] = nlohmann::json::array();
  doc["cases"].push_back(EpochSwitch(switches));
  doc["cases"].push_back(AliasRollback(400));
  for (auto& c : PublishToLive(argv[2], 10)) doc["cases"].push_back(c);
  if (const char* commit = std::getenv("GPUOS_COMMIT")) doc["commit"] = commit;
  std::ofstream(argv[1]) << doc.dump(2) << "\n";
  bool all = true;
  for (const auto& c : doc["cases"]) all = all && c["correct"].get<bool>();
  return all ? 0 : 1;
}

}  // namespace
}  // namespace gpuos::runtime

int main(int argc, char** argv) { return gpuos::runtime::Main(argc, argv); }
