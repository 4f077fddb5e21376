// For the runtime's GPU tests of descriptor and address tables: a test pack
// of two operators that read their task's whole table (runtime_gpu_test.cpp,
// runtime_launch_gpu_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpuos/registry/pack_loader.h"
#include "runtime_test_util.h"

namespace gpuos::runtime::testing {

// Operators that read their task's table: table_sum a descriptor table
// (AddTableTask), address_sum an address table (AddAddressTableTask).
constexpr const char* kTablePack = R"(gpuos_pack: 1
name: test.table
version: 0.1.0
operators:
  - name: table_sum
    version: 1.0.0
    kind: custom
    description: out[t] = sum over entries 1..count-2 of k * (its first float) + t, out = entry count-1.
    dtypes: [u8]
    inputs: []
    outputs: [{name: table}]
    attributes: [{name: count, type: i64}]
    body: |
      (void)table;
      if (ctx.thread_index() != 0) return;
      const ::gpuos::device::TensorDesc* entries = ctx.call().table;
      float sum = static_cast<float>(ctx.begin());
      for (long long k = 1; k + 1 < count; ++k) {
        sum += static_cast<float>(k) * *reinterpret_cast<const float*>(entries[k].data);
      }
      reinterpret_cast<float*>(entries[count - 1].data)[ctx.begin()] = sum;
  - name: address_sum
    version: 1.0.0
    kind: custom
    description: out[t] = sum over addresses k < count of k * (the float there) + t.
    dtypes: [u8]
    inputs: []
    outputs: [{name: table}]
    attributes: [{name: count, type: i64}]
    body: |
      (void)table;
      if (ctx.thread_index() != 0) return;
      const unsigned long long* addresses =
          reinterpret_cast<const unsigned long long*>(ctx.call().table + 1);
      float sum = static_cast<float>(ctx.begin());
      for (long long k = 0; k < count; ++k) {
        sum += static_cast<float>(k) * *reinterpret_cast<const float*>(addresses[k]);
      }
      reinterpret_cast<float*>(ctx.call().table[0].data)[ctx.begin()] = sum;
)";

// The configuration of a runtime that serves kTablePack.
inline RuntimeConfig TablePackConfig() {
  auto parsed = registry::ParsePack(kTablePack, "runtime_gpu_test.cpp");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  RuntimeConfig config;
  if (parsed.ok()) config.operators = parsed->operators;
  config.repository_path = std::string(GPUOS_BINARY_DIR) + "/runtime_test_cache.db";
  return config;
}

// A u8 scalar descriptor at `address`: a table's entry, or the anchor of an
// address table.
inline device::TensorDesc U8Entry(std::uint64_t address) {
  device::TensorDesc d = {};
  d.data = address;
  d.dtype = device::kDTypeU8;
  d.numel = 1;
  return d;
}

// Adds an address_sum task of `tiles` tiles (one work item each) to
// `graph`: its first descriptor `out`'s buffer, its addresses the first
// `count` floats of `held`.
inline Status AddAddressSum(TaskGraph& graph, const DeviceTensor& out, const DeviceTensor& held,
                            std::size_t count, std::uint32_t tiles) {
  std::vector<std::uint64_t> addresses;
  for (std::size_t k = 0; k < count; ++k) addresses.push_back(held.buffer.address + 4 * k);
  TaskOptions options;
  options.work_items = tiles;
  options.tiles = tiles;
  return graph
      .AddAddressTableTask("address_sum", DType::kU8, U8Entry(out.buffer.address), addresses,
                           {{"count", std::to_string(count)}}, {}, options)
      .status();
}

}  // namespace gpuos::runtime::testing
