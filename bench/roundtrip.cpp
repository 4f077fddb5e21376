// Where a small submission's round trip goes (a diagnostic; bench/README.md):
// the host's Submit, then the host spinning on Future::Ready until the
// device's completion word arrives, for a few one-task graphs, with the
// device's own queue records (RuntimeConfig::trace_capacity; the "admit" and
// "complete" records of docs/runtime.md, "Chrome trace") splitting the
// device's part into admission, tiles and completion. What is left of the
// round trip beyond the device's part is the pick-up of the submission (the
// pollers' read of the tail) and the host's noticing the completion word.
//
//   gpuos_bench_roundtrip OUT.json [iterations]
//
// Cases (interleaved, `iterations` each, default 2000):
//   noop         one no-op task
//   add_1tile    one `add` of a 64x64 f32 tensor, one tile
//   add_64tiles  the same split into 64 tiles (helpers join through the
//                help board)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../tests/core/runtime_test_util.h"
#include "bench_util.h"

namespace gpuos::runtime {
namespace {

using bench::Clock;
using bench::Samples;

#define CHECK_OK(expr) GPUOS_BENCH_CHECK(expr)

struct Case {
  std::string name;
  std::unique_ptr<TaskGraph> graph;
  Samples submit, roundtrip;
  std::vector<std::uint64_t> sequences;
};

// The device's part of each traced submission, split as the queue records
// and the tiles allow (us).
struct DeviceParts {
  Samples admit, to_first_tile, tiles, to_count, complete, device;
};

DeviceParts Split(const std::vector<TraceEvent>& events,
                  const std::vector<std::uint64_t>& sequences) {
  struct Bounds {
    const TraceEvent* admit = nullptr;
    const TraceEvent* complete = nullptr;
    std::uint64_t first = ~0ull, last = 0;
  };
  std::map<std::uint64_t, Bounds> by_sequence;
  for (std::uint64_t s : sequences) by_sequence[s];
  for (const TraceEvent& e : events) {
    auto it = by_sequence.find(e.sequence);
    if (it == by_sequence.end()) continue;
    Bounds& b = it->second;
    if (e.category == "queue") {
      if (e.name == "admit") b.admit = &e;
      if (e.name == "complete") b.complete = &e;  // not a helper's "help" record
    } else {
      b.first = std::min(b.first, e.start_ns);
      b.last = std::max(b.last, e.start_ns + e.duration_ns);
    }
  }
  DeviceParts parts;
  auto us = [](double ns) { return ns / 1000.0; };
  for (const auto& [sequence, b] : by_sequence) {
    if (b.admit == nullptr || b.complete == nullptr || b.last == 0) continue;
    const double claim = static_cast<double>(b.admit->start_ns);
    const double counted = static_cast<double>(b.complete->start_ns);
    parts.admit.us.push_back(us(static_cast<double>(b.admit->duration_ns)));
    parts.to_first_tile.us.push_back(us(static_cast<double>(b.first) - claim));
    parts.tiles.us.push_back(us(static_cast<double>(b.last - b.first)));
    parts.to_count.us.push_back(us(counted - static_cast<double>(b.last)));
    parts.complete.us.push_back(us(static_cast<double>(b.complete->duration_ns)));
    parts.device.us.push_back(us(counted + static_cast<double>(b.complete->duration_ns) - claim));
  }
  return parts;
}

nlohmann::json Summary(const Samples& s) {
  return {{"median_us", s.Percentile(0.5)},
          {"p10_us", s.Percentile(0.1)},
          {"p90_us", s.Percentile(0.9)},
          {"count", s.us.size()}};
}

int Main(int argc, char** argv) {
  const std::string out_path = argc > 1 ? argv[1] : "roundtrip.json";
  const int iterations = argc > 2 ? std::max(10, std::atoi(argv[2])) : 2000;
  std::string skip, error;
  RuntimeConfig config;
  config.trace_capacity = 1u << 20;
  config.idle_park = std::chrono::seconds(10);
  auto runtime = testing::OpenTestRuntime(config, &skip, &error);
  if (!runtime) {
    std::fprintf(stderr, "roundtrip probe: %s\n", (skip + error).c_str());
    return skip.empty() ? 1 : 0;
  }
  constexpr long long kN = 64 * 64;
  auto a = testing::Upload(*runtime, std::vector<float>(kN, 1.0f));
  auto b = testing::Upload(*runtime, std::vector<float>(kN, 2.0f));
  auto c = testing::Upload(*runtime, std::vector<float>(kN, 0.0f));
  CHECK_OK(a);
  CHECK_OK(b);
  CHECK_OK(c);
  std::vector<Case> cases;
  auto add_case = [&](const std::string& name, std::uint32_t tiles) {
    Case k;
    k.name = name;
    k.graph = std::make_unique<TaskGraph>(*runtime);
    if (tiles == 0) {
      CHECK_OK(k.graph->AddNoop());
    } else {
      TaskOptions options;
      options.tiles = tiles;
      CHECK_OK(k.graph->Add("add", DType::kF32, {a->desc, b->desc, c->desc}, {}, {}, options));
    }
    cases.push_back(std::move(k));
  };
  add_case("noop", 0);
  add_case("add_1tile", 1);
  add_case("add_64tiles", 64);

  auto run_once = [&](Case& k, bool keep) {
    const Clock::time_point t0 = Clock::now();
    auto future = runtime->Submit(*k.graph);
    CHECK_OK(future);
    const Clock::time_point submitted = Clock::now();
    while (!future->Ready()) {
    }
    const Clock::time_point done = Clock::now();
    CHECK_OK(future->Wait(std::chrono::seconds(1)));  // its errors, if any
    if (!keep) return;
    k.submit.us.push_back(std::chrono::duration<double, std::micro>(submitted - t0).count());
    k.roundtrip.us.push_back(std::chrono::duration<double, std::micro>(done - t0).count());
    k.sequences.push_back(future->sequence());
  };
  for (int warm = 0; warm < 50; ++warm) {
    for (Case& k : cases) run_once(k, false);
  }
  for (int it = 0; it < iterations; ++it) {
    for (Case& k : cases) run_once(k, true);
  }
  auto out = testing::Download(*runtime, *c);
  CHECK_OK(out);
  const bool correct = std::all_of(out->begin(), out->end(), [](float v) { return v == 3.0f; });

  auto events = runtime->TraceEvents();
  CHECK_OK(events);
  nlohmann::json doc;
  const char* commit = std::getenv("GPUOS_COMMIT");
  doc["commit"] = commit != nullptr ? commit : "unknown";
  doc["device"] = runtime->device_name();
  doc["correct"] = correct;
  doc["note"] =
      "host wall time of Submit and of Submit until Future::Ready (host spinning); device parts "
      "from the queue's trace records (medians over the traced submissions): admit = claim until "
      "the first task is about to start, to_first_tile = claim until the first tile starts, "
      "tiles = first tile start until last tile end, to_count = last tile end until the last "
      "completion is counted, complete = counted until the completion word is stored, device = "
      "claim until stored; host_and_link = roundtrip - submit - device (medians): the pick-up "
      "and the host noticing the word";
  std::printf("%-12s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "case", "submit", "roundtr", "admit",
              "to_tile", "tiles", "to_count", "complete", "device", "rest");
  for (Case& k : cases) {
    const DeviceParts parts = Split(*events, k.sequences);
    const double rest =
        k.roundtrip.Percentile(0.5) - k.submit.Percentile(0.5) - parts.device.Percentile(0.5);
    doc["cases"][k.name] = {{"submit", Summary(k.submit)},
                            {"roundtrip", Summary(k.roundtrip)},
                            {"admit", Summary(parts.admit)},
                            {"to_first_tile", Summary(parts.to_first_tile)},
                            {"tiles", Summary(parts.tiles)},
                            {"to_count", Summary(parts.to_count)},
                            {"complete", Summary(parts.complete)},
                            {"device", Summary(parts.device)},
                            {"host_and_link_us", rest}};
    std::printf("%-12s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", k.name.c_str(),
                k.submit.Percentile(0.5), k.roundtrip.Percentile(0.5), parts.admit.Percentile(0.5),
                parts.to_first_tile.Percentile(0.5), parts.tiles.Percentile(0.5),
                parts.to_count.Percentile(0.5), parts.complete.Percentile(0.5),
                parts.device.Percentile(0.5), rest);
  }
  std::ofstream(out_path) << doc.dump(1) << "\n";
  std::printf("wrote %s (correct: %s)\n", out_path.c_str(), correct ? "true" : "false");
  return correct ? 0 : 1;
}

}  // namespace
}  // namespace gpuos::runtime

int main(int argc, char** argv) { return gpuos::runtime::Main(argc, argv); }
