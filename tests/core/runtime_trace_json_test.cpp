// The Chrome trace writer (gpuos/runtime/chrome_trace.h) on given events: no
// GPU needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpuos/runtime/chrome_trace.h"

namespace gpuos::runtime {
namespace {

TraceEvent Event(unsigned int block, std::uint64_t start_ns, std::uint64_t duration_ns,
                 std::uint32_t task_id, std::string name) {
  TraceEvent e;
  e.block = block;
  e.start_ns = start_ns;
  e.duration_ns = duration_ns;
  e.task_id = task_id;
  e.sequence = 9;
  e.name = std::move(name);
  return e;
}

nlohmann::json Parse(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, false);
  EXPECT_FALSE(json.is_discarded()) << text;
  return json;
}

std::vector<nlohmann::json> Complete(const nlohmann::json& trace) {
  std::vector<nlohmann::json> events;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") events.push_back(e);
  }
  return events;
}

TEST(ChromeTraceJsonTest, CompleteEventsInMicrosecondsSortedPerBlock) {
  // Given out of order, on two blocks, on an absolute device clock.
  const std::uint64_t base = 1'700'000'000'000'000'000ull;
  std::vector<TraceEvent> events = {
      Event(3, base + 5'000, 1'500, 12, "mul f16"),
      Event(0, base + 2'000, 500, 11, "add f32"),
      Event(3, base + 1'000, 2'000, 10, "add f32"),
  };
  events[0].task_index = 2;
  events[0].tile = 1;
  events[0].num_tiles = 4;
  events[0].version = "1.2.0";
  events[0].grid = 3;
  ChromeTraceProcess process{7, "gpuos device 7 (test)", "worker block"};
  const nlohmann::json trace = Parse(ChromeTraceJson(events, process));

  EXPECT_EQ(trace.at("otherData").at("origin_ns").get<std::uint64_t>(), base + 1'000);
  const auto complete = Complete(trace);
  ASSERT_EQ(complete.size(), 3u);
  // Sorted by (block, start); ts relative to the earliest start, in us.
  EXPECT_EQ(complete[0].at("tid"), 0);
  EXPECT_DOUBLE_EQ(complete[0].at("ts").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(complete[0].at("dur").get<double>(), 0.5);
  EXPECT_EQ(complete[1].at("tid"), 3);
  EXPECT_DOUBLE_EQ(complete[1].at("ts").get<double>(), 0.0);
  EXPECT_EQ(complete[1].at("args").at("task_id"), 10);
  EXPECT_EQ(complete[2].at("name"), "mul f16");
  EXPECT_DOUBLE_EQ(complete[2].at("ts").get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(complete[2].at("dur").get<double>(), 1.5);
  for (const auto& e : complete) {
    EXPECT_EQ(e.at("pid"), 7);
    EXPECT_EQ(e.at("cat"), "task");
    EXPECT_EQ(e.at("args").at("sequence"), 9);
  }
  const auto& args = complete[2].at("args");
  EXPECT_EQ(args.at("task"), 2);
  EXPECT_EQ(args.at("tile"), 1);
  EXPECT_EQ(args.at("num_tiles"), 4);
  EXPECT_EQ(args.at("version"), "1.2.0");
  EXPECT_EQ(args.at("grid"), 3);
  EXPECT_FALSE(complete[0].at("args").contains("grid")) << "grid 0 means not known";
  EXPECT_FALSE(complete[0].at("args").contains("task"));  // unknown: left out

  // Metadata names the process and each block that has events.
  std::map<std::string, std::vector<std::string>> names;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M") names[e.at("name")].push_back(e.at("args").at("name"));
  }
  EXPECT_EQ(names["process_name"], (std::vector<std::string>{"gpuos device 7 (test)"}));
  EXPECT_EQ(names["thread_name"], (std::vector<std::string>{"worker block 0", "worker block 3"}));
}

TEST(ChromeTraceJsonTest, EmptyTraceAndOddNamesStayValidJson) {
  const nlohmann::json empty = Parse(ChromeTraceJson({}, {}));
  EXPECT_TRUE(Complete(empty).empty());
  EXPECT_EQ(empty.at("otherData").at("origin_ns"), 0);

  std::vector<TraceEvent> events = {Event(1, 100, 10, 1, "quote\" back\\slash \xff end")};
  const nlohmann::json odd = Parse(ChromeTraceJson(events, {}));
  const auto complete = Complete(odd);
  ASSERT_EQ(complete.size(), 1u);
  const std::string name = complete[0].at("name");
  EXPECT_EQ(name.rfind("quote\" back\\slash ", 0), 0u) << name;
  EXPECT_NE(name.find("end"), std::string::npos);
}

TEST(ChromeTraceJsonTest, WriteChromeTraceWritesTheFileAndNamesABadPath) {
  const std::string path =
      std::string(GPUOS_BINARY_DIR) + "/chrome_trace_test_" + std::to_string(::getpid()) + ".json";
  std::vector<TraceEvent> events = {Event(0, 50, 5, 1, "add f32")};
  ASSERT_TRUE(WriteChromeTrace(path, events, {}).ok());
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(Complete(Parse(text.str())).size(), 1u);
  std::remove(path.c_str());

  const std::string bad = std::string(GPUOS_BINARY_DIR) + "/no/such/dir/trace.json";
  const Status status = WriteChromeTrace(bad, events, {});
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(bad), std::string::npos) << status.message();
}

}  // namespace
}  // namespace gpuos::runtime
