#include "demo_live.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gpuos/control/control_client.h"
#include "gpuos/registry/pack_loader.h"
#include "gpuos/registry/repository.h"
#include "gpuos/runtime/runtime.h"

namespace gpuos::cli {
namespace {

constexpr const char* kOperator = "demo_offset";

// demo_offset@1.N.0 adds N + 1: a result names the version that made it.
std::string DemoPackYaml(std::uint32_t minor) {
  const std::string v = "1." + std::to_string(minor) + ".0";
  return "gpuos_pack: 1\nname: demo.live\nversion: " + v +
         "\ndescription: gpuos demo live update\noperators:\n  - name: demo_offset\n"
         "    version: " +
         v + "\n    kind: elementwise\n    description: out = x + " + std::to_string(minor + 1) +
         "\n    dtypes: [f32]\n    inputs: [{name: x}]\n"
         "    outputs: [{name: out}]\n    body: \"out = x + compute_t(" +
         std::to_string(minor + 1) + ");\"\n";
}

// What gpuos-registry does after a change: tell the live runtimes.
Status Notify(const std::string& repository, control::Command command, const std::string& version,
              std::string* action) {
  control::Request request;
  request.command = command;
  request.repository = repository;
  request.operators = {{kOperator, version}};
  GPUOS_ASSIGN_OR_RETURN(auto report,
                         control::NotifyAll(repository, request, std::chrono::seconds(120)));
  for (const auto& answer : report.answers) {
    GPUOS_RETURN_IF_ERROR(answer.status);
    if (!answer.response->ok)
      return Internal("runtime refused: " + answer.response->error->message);
    *action = answer.response->result.value("action", std::string("?"));
  }
  if (report.answers.empty()) return Unavailable("no live runtime answered");
  return Status::Ok();
}

struct Phase {
  std::string name;
  std::map<float, long> results;  // increment -> submissions
};

}  // namespace

Expected<nlohmann::json> RunLiveUpdateDemo(const std::string& repository_path, const Output& out) {
  registry::RepositoryOptions options;
  options.path = repository_path;
  GPUOS_ASSIGN_OR_RETURN(auto repo, registry::Repository::Open(options));
  // The versions so far: this run publishes the next one.
  std::uint32_t next = 0;
  auto versions = repo->ListVersions(kOperator);
  if (versions.ok()) {
    for (const auto& v : *versions) next = std::max(next, v.version.minor + 1);
  }
  if (next == 0) {
    GPUOS_ASSIGN_OR_RETURN(auto pack, registry::ParsePack(DemoPackYaml(0), "demo.live"));
    GPUOS_RETURN_IF_ERROR(repo->Publish(pack).status());
    next = 1;
  }
  GPUOS_ASSIGN_OR_RETURN(auto current, repo->GetOperator(kOperator));
  const std::uint32_t before = current.spec.version.minor;

  out.Line("== live update: a runtime on the repository serves while " + std::string(kOperator) +
           " changes");
  runtime::RuntimeConfig config;
  config.repository_path = repository_path;
  GPUOS_ASSIGN_OR_RETURN(auto rt, runtime::Runtime::Open(config));
  out.Line("   control socket " + rt->control_socket_path());

  constexpr long long kN = 1024;
  constexpr std::size_t kSlots = 64;
  GPUOS_ASSIGN_OR_RETURN(runtime::DeviceBuffer buffer, rt->Allocate(kSlots * kN * sizeof(float)));
  std::vector<Phase> phases = {
      {"before the publish", {}}, {"after the publish", {}}, {"after the rollback", {}}};
  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  std::atomic<long> submitted{0}, completed{0}, bad{0};
  std::mutex phases_mutex;
  Status load_status;
  // Each submission writes x + increment into a zeroed slot in place (y = y
  // + k): a re-run would show 2k, a lost task 0.
  std::thread load([&] {
    std::vector<float> host(kN);
    const std::vector<float> zeros(kN, 0.0f);
    for (std::size_t i = 0; !stop; ++i) {
      const std::uint64_t at = buffer.address + (i % kSlots) * kN * sizeof(float);
      const device::TensorDesc y = device::MakeContiguousTensorDesc(at, device::kDTypeF32, 1, &kN);
      const int now = phase.load();
      Status s = rt->CopyToDevice(at, zeros.data(), kN * sizeof(float));
      runtime::TaskGraph graph(*rt);
      if (s.ok()) s = graph.Add(kOperator, DType::kF32, {y, y}).status();
      Expected<runtime::Future> f = s.ok() ? rt->Submit(graph) : Expected<runtime::Future>(s);
      if (!f.ok()) {
        load_status = f.status();
        return;
      }
      ++submitted;
      s = f->Wait();
      if (s.ok()) s = rt->CopyToHost(host.data(), at, kN * sizeof(float));
      if (!s.ok()) {
        load_status = s;
        return;
      }
      ++completed;
      for (float v : host) bad += v != host[0];
      std::lock_guard<std::mutex> lock(phases_mutex);
      ++phases[static_cast<std::size_t>(now)].results[host[0]];
    }
  });
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); };
  pause();
  const std::string new_version = "1." + std::to_string(next) + ".0";
  std::string publish_action, rollback_action;
  auto t0 = std::chrono::steady_clock::now();
  Status changed = [&]() -> Status {
    GPUOS_ASSIGN_OR_RETURN(auto pack, registry::ParsePack(DemoPackYaml(next), "demo.live"));
    GPUOS_RETURN_IF_ERROR(repo->Publish(pack).status());
    return Notify(repository_path, control::Command::kPublished, new_version, &publish_action);
  }();
  const double publish_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  phase = 1;
  double rollback_ms = 0;
  if (changed.ok()) {
    pause();
    t0 = std::chrono::steady_clock::now();
    changed = [&]() -> Status {
      GPUOS_RETURN_IF_ERROR(repo->Rollback(kOperator).status());
      return Notify(repository_path, control::Command::kRolledBack,
                    "1." + std::to_string(before) + ".0", &rollback_action);
    }();
    rollback_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    phase = 2;
    pause();
  }
  stop = true;
  load.join();
  GPUOS_RETURN_IF_ERROR(changed);
  GPUOS_RETURN_IF_ERROR(load_status);

  char line[256];
  std::snprintf(line, sizeof(line),
                "   published %s %s (adds %u): the runtime did %s; %.1f ms from publish to its "
                "answer",
                kOperator, new_version.c_str(), next + 1, publish_action.c_str(), publish_ms);
  out.Line(line);
  std::snprintf(line, sizeof(line),
                "   rolled back to 1.%u.0 (adds %u): the runtime did %s; %.2f ms from rollback "
                "to its answer",
                before, before + 1, rollback_action.c_str(), rollback_ms);
  out.Line(line);
  nlohmann::json doc_phases = nlohmann::json::array();
  for (const Phase& p : phases) {
    std::string row = "   " + p.name + ":";
    nlohmann::json counts = nlohmann::json::object();
    for (const auto& [value, count] : p.results) {
      row += " +" + std::to_string(static_cast<int>(value)) + " x" + std::to_string(count);
      counts[std::to_string(static_cast<int>(value))] = count;
    }
    out.Line(row);
    doc_phases.push_back({{"phase", p.name}, {"results", counts}});
  }
  // Every result is one version's increment, once: no other value may appear.
  long wrong = bad;
  for (const Phase& p : phases) {
    for (const auto& [value, count] : p.results) {
      if (value != static_cast<float>(before + 1) && value != static_cast<float>(next + 1)) {
        wrong += count;
      }
    }
  }
  const long lost = submitted - completed;
  out.Line("   tasks run " + std::to_string(completed.load()) + ", lost " + std::to_string(lost) +
           ", re-run or wrong " + std::to_string(wrong));
  const runtime::RuntimeStats stats = rt->stats();
  nlohmann::json doc = {{"operator", kOperator},
                        {"published", new_version},
                        {"publish_action", publish_action},
                        {"rollback_action", rollback_action},
                        {"publish_to_answer_ms", publish_ms},
                        {"phases", doc_phases},
                        {"tasks_run", completed.load()},
                        {"lost", lost},
                        {"rerun_or_wrong", wrong},
                        {"epoch_switches", stats.epoch_switches},
                        {"alias_flips", stats.alias_flips}};
  rt->Free(buffer);
  if (lost != 0 || wrong != 0) {
    return Internal("the live update lost or corrupted results (see the table)");
  }
  const bool changed_and_back = !phases[1].results.empty() &&
                                phases[1].results.count(static_cast<float>(next + 1)) != 0 &&
                                phases[2].results.count(static_cast<float>(before + 1)) != 0;
  if (!changed_and_back) {
    return Internal("the results did not change with the publish and back with the rollback");
  }
  return doc;
}

}  // namespace gpuos::cli
