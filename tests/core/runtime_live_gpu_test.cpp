// Live updates on a GPU (docs/live-update.md): alias flips and epoch switches
// while the worker runs, submissions bound to the versions they were
// submitted against, a staged image that fails to build, the control socket,
// and 10,000 publish/rollback cycles under continuous load with every result
// checked. Skips with the reason where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "gpuos/control/control_client.h"
#include "gpuos/registry/repository.h"
#include "live_probe.h"
#include "runtime_gpu_fixture.h"
#include "runtime_test_util.h"

namespace gpuos::runtime {
namespace {

using registry::SemVer;
using testing::DeviceTensor;
using testing::Download;
using testing::Upload;

using testing::ProbePack;

registry::OperatorSpec Probe(std::uint32_t minor, const std::string& body = "") {
  auto pack = ProbePack(minor, body);
  if (!pack.ok()) ADD_FAILURE() << pack.status().ToString();
  return pack.ok() ? pack->operators.at(0) : registry::OperatorSpec{};
}

float Increment(const SemVer& version) { return testing::ProbeIncrement(version.minor); }

class LiveGpuTest : public testing::GpuRuntimeTest {
 protected:
  // A runtime over add and the given probe versions, without a control socket.
  std::unique_ptr<Runtime> Open(std::vector<registry::OperatorSpec> probes) {
    RuntimeConfig config;
    config.operators = testing::ElementwiseOps({"add"});
    for (auto& p : probes) config.operators.push_back(std::move(p));
    config.repository_path = std::string(GPUOS_BINARY_DIR) + "/runtime_live_cache.db";
    config.control_socket = "off";
    return OpenConfig(config);
  }
};

// `steps` in-place probes on `y`: y += steps * increment of the bound version.
Expected<Future> SubmitProbes(Runtime& runtime, const DeviceTensor& y, int steps) {
  TaskGraph graph(runtime);
  for (int i = 0; i < steps; ++i) {
    std::vector<TaskId> deps;
    if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
    GPUOS_RETURN_IF_ERROR(graph.Add("probe", DType::kF32, {y.desc, y.desc}, {}, deps).status());
  }
  return runtime.Submit(graph);
}

TEST_F(LiveGpuTest, AliasFlipBindsSubmissionsToTheirVersion) {
  OPEN_OR_SKIP(runtime, Open((std::vector<registry::OperatorSpec>{Probe(0), Probe(1)})));
  EXPECT_EQ(runtime->Resolve("probe", DType::kF32)->version, (SemVer{1, 1, 0}));
  constexpr std::size_t kN = 1 << 16;
  constexpr int kSteps = 1000;  // long enough to still run when the flip lands
  auto a = Upload(*runtime, std::vector<float>(kN, 0.0f));
  auto b = Upload(*runtime, std::vector<float>(kN, 0.0f));
  ASSERT_TRUE(a.ok() && b.ok());
  auto first = SubmitProbes(*runtime, *a, kSteps);  // bound to 1.1.0
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(runtime->Activate("probe", {1, 0, 0}).ok());
  EXPECT_FALSE(first->Ready()) << "the flip should land while the first graph runs";
  auto second = SubmitProbes(*runtime, *b, kSteps);  // bound to 1.0.0
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(first->Wait().ok());
  ASSERT_TRUE(second->Wait().ok());
  auto ra = Download(*runtime, *a);
  auto rb = Download(*runtime, *b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (std::size_t i = 0; i < kN; i += 997) {
    ASSERT_EQ((*ra)[i], kSteps * 2.0f) << "the first graph ran on another version, at " << i;
    ASSERT_EQ((*rb)[i], kSteps * 1.0f) << "the second graph ran on another version, at " << i;
  }
  EXPECT_EQ(runtime->stats().alias_flips, 1u);
  EXPECT_EQ(runtime->stats().epoch_switches, 0u);
  auto missing = runtime->Activate("probe", {1, 7, 0});
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition) << missing.ToString();
}

TEST_F(LiveGpuTest, EpochSwitchAndAFailedStagedImage) {
  OPEN_OR_SKIP(runtime, Open((std::vector<registry::OperatorSpec>{Probe(0), Probe(1)})));
  auto y = Upload(*runtime, std::vector<float>(4096, 0.0f));
  ASSERT_TRUE(y.ok());
  auto before = SubmitProbes(*runtime, *y, 50);  // in flight during the switch
  ASSERT_TRUE(before.ok());
  auto outcome = runtime->Update({LiveOperator{Probe(2), Probe(1)}});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->action, "epoch_switch");
  EXPECT_GT(outcome->gap_us, 0.0);
  ASSERT_TRUE(before->Wait().ok());
  auto after = SubmitProbes(*runtime, *y, 10);
  ASSERT_TRUE(after.ok());
  ASSERT_TRUE(after->Wait().ok());
  EXPECT_EQ((*Download(*runtime, *y))[17], 50 * 2.0f + 10 * 3.0f);
  // The image now holds 1.2.0 and 1.1.0: back to 1.1.0 is a flip.
  auto flip = runtime->Update({LiveOperator{Probe(1), Probe(2)}});
  ASSERT_TRUE(flip.ok()) << flip.status().ToString();
  EXPECT_EQ(flip->action, "alias_flip");
  // A version whose code does not compile: the service is unaffected.
  auto broken = runtime->Update({LiveOperator{Probe(3, "out = x + ;"), Probe(1)}});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("keeps serving"), std::string::npos)
      << broken.status().message();
  auto still = SubmitProbes(*runtime, *y, 1);
  ASSERT_TRUE(still.ok() && still->Wait().ok());
  EXPECT_EQ((*Download(*runtime, *y))[17], 50 * 2.0f + 10 * 3.0f + 2.0f);
  EXPECT_EQ(runtime->stats().epoch_switches, 1u);
  // The other operators survived the epoch.
  EXPECT_TRUE(runtime->Resolve("add", DType::kF32).ok());
}

// 10,000 publish/rollback cycles mixing alias flips and epoch switches while
// another thread keeps the worker busy. Every probe graph adds 4 x the
// increment of the version it was submitted against to its own buffer; a
// lost, re-run or misrouted task changes the sum.
TEST_F(LiveGpuTest, TenThousandCyclesUnderLoadLoseNothing) {
  OPEN_OR_SKIP(runtime, Open((std::vector<registry::OperatorSpec>{Probe(0), Probe(1)})));
  constexpr int kCycles = 10000;
  constexpr int kSteps = 4;
  constexpr std::size_t kN = 256;
  constexpr std::size_t kBuffers = 64;
  std::vector<DeviceTensor> buffers;
  for (std::size_t i = 0; i < kBuffers; ++i) {
    auto t = Upload(*runtime, std::vector<float>(kN, 0.0f));
    ASSERT_TRUE(t.ok());
    buffers.push_back(*t);
  }
  std::vector<float> expected(kBuffers, 0.0f);

  // Continuous load: chains of adds, each checked.
  std::atomic<bool> stop{false};
  std::atomic<long> load_graphs{0}, load_errors{0};
  std::thread load([&] {
    auto x = Upload(*runtime, std::vector<float>(kN, 1.0f));
    auto z = Upload(*runtime, std::vector<float>(kN, 0.0f));
    if (!x.ok() || !z.ok()) {
      ++load_errors;
      return;
    }
    float total = 0;
    while (!stop) {
      TaskGraph graph(*runtime);
      for (int i = 0; i < 8; ++i) {
        std::vector<TaskId> deps;
        if (i > 0) deps.push_back(static_cast<TaskId>(i - 1));
        if (!graph.Add("add", DType::kF32, {z->desc, x->desc, z->desc}, {}, deps).ok())
          ++load_errors;
      }
      auto f = runtime->Submit(graph);
      if (!f.ok() || !f->Wait().ok()) ++load_errors;
      total += 8;
      ++load_graphs;
    }
    auto out = Download(*runtime, *z);
    if (!out.ok() || (*out)[kN - 1] != total) ++load_errors;
  });

  std::mt19937 rng(1234);
  const SemVer versions[3] = {{1, 0, 0}, {1, 1, 0}, {1, 2, 0}};
  SemVer active = versions[1];
  std::vector<Future> pending;
  int flips = 0, switches = 0;
  std::uint64_t max_retired = 0;  // replaced images kept loaded, never unbounded
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const std::size_t buffer = static_cast<std::size_t>(cycle) % kBuffers;
    auto f = SubmitProbes(*runtime, buffers[buffer], kSteps);
    ASSERT_TRUE(f.ok()) << "cycle " << cycle << ": " << f.status().ToString();
    expected[buffer] += kSteps * Increment(active);
    pending.push_back(*f);
    // Publish or roll back: 1 in 10 cycles moves between images
    // {1.1.0, 1.0.0} and {1.2.0, 1.1.0}, the rest flip within the image.
    const bool other_image = rng() % 10 == 0;
    const auto in_image = runtime->ActiveOperators();
    SemVer target = active;
    std::optional<SemVer> previous;
    for (const auto& op : in_image) {
      if (op.name != "probe") continue;
      if (other_image) {
        target = op.in_image.front() == versions[0] ? versions[2] : versions[0];
        previous = versions[1];
      } else {
        target = op.in_image.front() == active ? op.in_image.back() : op.in_image.front();
        previous = active;
      }
    }
    auto outcome = runtime->Update({LiveOperator{Probe(target.minor), Probe(previous->minor)}});
    ASSERT_TRUE(outcome.ok()) << "cycle " << cycle << ": " << outcome.status().ToString();
    (outcome->action == "epoch_switch" ? switches : flips) += 1;
    max_retired = std::max(max_retired, runtime->stats().retired_images);
    active = target;
    if (pending.size() == kBuffers) {
      for (const Future& p : pending) ASSERT_TRUE(p.Wait().ok());
      pending.clear();
    }
  }
  for (const Future& p : pending) ASSERT_TRUE(p.Wait().ok());
  stop = true;
  load.join();
  EXPECT_EQ(load_errors.load(), 0);
  EXPECT_GT(load_graphs.load(), 0);
  int wrong = 0;
  for (std::size_t b = 0; b < kBuffers; ++b) {
    auto out = Download(*runtime, buffers[b]);
    ASSERT_TRUE(out.ok());
    for (std::size_t i = 0; i < kN; ++i) wrong += (*out)[i] != expected[b];
  }
  EXPECT_EQ(wrong, 0);
  ASSERT_TRUE(runtime->Synchronize().ok());
  const RuntimeStats stats = runtime->stats();
  EXPECT_EQ(stats.tiles_completed, stats.tasks_submitted) << "lost or re-run tasks";
  EXPECT_GT(switches, 100);
  EXPECT_GT(flips, 1000);
  EXPECT_LE(max_retired, 4u);
  ASSERT_TRUE(runtime->WaitUntilParked().ok());  // a park unloads the replaced images
  EXPECT_EQ(runtime->stats().retired_images, 0u);
  std::cout << "cycles " << kCycles << ": alias flips " << flips << ", epoch switches " << switches
            << ", most replaced images kept " << max_retired << ", load graphs "
            << load_graphs.load() << ", tasks " << stats.tasks_submitted << " run "
            << stats.tiles_completed << ", last epoch gap " << stats.last_epoch_gap_us << " us\n";
}

// Operators from pack files (RuntimeConfig::pack_paths); a bad path is an
// error that names it.
TEST_F(LiveGpuTest, PackPathsGiveTheOperators) {
  const std::filesystem::path dir = std::filesystem::path(GPUOS_BINARY_DIR) / "live_pack_paths";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "probe.yaml") << testing::ProbeYaml(3);
  RuntimeConfig config;
  config.pack_paths = {dir.string()};
  config.repository_path = std::string(GPUOS_BINARY_DIR) + "/runtime_live_cache.db";
  auto opened = Runtime::Open(config);
  if (!opened.ok() && opened.status().message().rfind("no CUDA", 0) == 0) {
    GTEST_SKIP() << opened.status().message();
  }
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_TRUE((*opened)->control_socket_path().empty()) << "operators not from the repository";
  auto y = Upload(**opened, std::vector<float>(64, 0.0f));
  ASSERT_TRUE(y.ok());
  auto f = SubmitProbes(**opened, *y, 2);
  ASSERT_TRUE(f.ok() && f->Wait().ok());
  EXPECT_EQ((*Download(**opened, *y))[5], 8.0f);
  ASSERT_TRUE((*opened)->Shutdown().ok());
  config.pack_paths = {(dir / "missing.yaml").string()};
  auto bad = Runtime::Open(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("missing.yaml"), std::string::npos)
      << bad.status().message();
}

// A runtime on a repository listens on its control socket; a publish and a
// rollback reach it through NotifyAll (what gpuos-registry does).
TEST_F(LiveGpuTest, ControlSocketPublishAndRollback) {
  const std::string repo_path = std::string(GPUOS_BINARY_DIR) + "/runtime_live_repo.db";
  std::filesystem::remove(repo_path);
  std::filesystem::remove_all(control::RuntimeDirectory(repo_path));
  registry::RepositoryOptions repo_options;
  repo_options.path = repo_path;
  auto repo = registry::Repository::Open(repo_options);
  ASSERT_TRUE(repo.ok()) << repo.status().ToString();
  auto publish = [&](std::uint32_t minor) -> Status {
    GPUOS_ASSIGN_OR_RETURN(registry::OperatorPack pack, ProbePack(minor));
    return (*repo)->Publish(pack).status();
  };
  ASSERT_TRUE(publish(0).ok());
  RuntimeConfig config;
  config.repository_path = repo_path;
  auto opened = Runtime::Open(config);
  if (!opened.ok() && opened.status().message().rfind("no CUDA", 0) == 0) {
    GTEST_SKIP() << opened.status().message();
  }
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Runtime& runtime = **opened;
  ASSERT_FALSE(runtime.control_socket_path().empty());
  {
    // A second runtime of this process on the same repository gets its own socket.
    auto second = Runtime::Open(config);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_NE((*second)->control_socket_path(), runtime.control_socket_path());
    auto both = control::ListRuntimes(repo_path, std::chrono::seconds(5));
    ASSERT_TRUE(both.ok());
    EXPECT_EQ(both->answers.size(), 2u);
  }
  auto y = Upload(runtime, std::vector<float>(1024, 0.0f));
  ASSERT_TRUE(y.ok());

  ASSERT_TRUE(publish(1).ok());
  control::Request request;
  request.command = control::Command::kPublished;
  request.repository = repo_path;
  request.operators = {{"probe", "1.1.0"}};
  auto report = control::NotifyAll(repo_path, request, std::chrono::seconds(60));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->answers.size(), 1u);
  ASSERT_TRUE(report->answers[0].status.ok()) << report->answers[0].status.ToString();
  ASSERT_TRUE(report->answers[0].response->ok) << report->answers[0].response->error->message;
  EXPECT_EQ(report->answers[0].response->result["action"], "epoch_switch");
  auto f = SubmitProbes(runtime, *y, 1);
  ASSERT_TRUE(f.ok() && f->Wait().ok());
  EXPECT_EQ((*Download(runtime, *y))[3], 2.0f);

  ASSERT_TRUE((*repo)->Rollback("probe").ok());
  request.command = control::Command::kRolledBack;
  request.operators = {{"probe", "1.0.0"}};
  report = control::NotifyAll(repo_path, request, std::chrono::seconds(60));
  ASSERT_TRUE(report.ok() && report->answers.size() == 1u && report->answers[0].status.ok());
  EXPECT_EQ(report->answers[0].response->result["action"], "alias_flip");
  f = SubmitProbes(runtime, *y, 1);
  ASSERT_TRUE(f.ok() && f->Wait().ok());
  EXPECT_EQ((*Download(runtime, *y))[3], 3.0f);

  auto status = control::ListRuntimes(repo_path, std::chrono::seconds(5));
  ASSERT_TRUE(status.ok() && status->answers.size() == 1u);
  const auto& result = status->answers[0].response->result;
  ASSERT_TRUE(result.contains("operators")) << result.dump();
  bool found = false;
  for (const auto& op : result["operators"]) {
    if (op["name"] == "probe") {
      found = true;
      EXPECT_EQ(op["version"], "1.0.0");
      EXPECT_EQ(op["in_image"].size(), 2u);
    }
  }
  EXPECT_TRUE(found) << result.dump();
  // A request for another repository is refused; the runtime keeps serving.
  request.repository = repo_path + ".other";
  auto refused =
      control::SendRequest(runtime.control_socket_path(), request, std::chrono::seconds(5));
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->ok);
  f = SubmitProbes(runtime, *y, 1);
  ASSERT_TRUE(f.ok() && f->Wait().ok());

  // An operator the image lacks but the repository has is staged on first use.
  std::string extra = testing::ProbeYaml(4);
  extra.replace(extra.find("name: test.live"), 15, "name: test.xtra");
  extra.replace(extra.find("name: probe"), 11, "name: probx");
  auto extra_pack = registry::ParsePack(extra, "extra.yaml");
  ASSERT_TRUE(extra_pack.ok()) << extra_pack.status().ToString();
  ASSERT_TRUE((*repo)->Publish(*extra_pack).ok());
  const std::uint64_t switches = runtime.stats().epoch_switches;
  TaskGraph graph(runtime);
  ASSERT_TRUE(graph.Add("probx", DType::kF32, {y->desc, y->desc}).ok());
  EXPECT_EQ(runtime.stats().epoch_switches, switches + 1);
  f = runtime.Submit(graph);
  ASSERT_TRUE(f.ok() && f->Wait().ok());
  EXPECT_EQ((*Download(runtime, *y))[3], 4.0f + 5.0f);

  ASSERT_TRUE(runtime.Shutdown().ok());
  EXPECT_FALSE(std::filesystem::exists(control::RuntimeSocketPath(repo_path, ::getpid())));
}

}  // namespace
}  // namespace gpuos::runtime
