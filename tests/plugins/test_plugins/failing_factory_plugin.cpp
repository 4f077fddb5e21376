// A scheduler whose factory fails in the way its config asks:
//   fail=unavailable (default)  -> Unavailable status
//   fail=throw                  -> throws std::runtime_error
//   fail=internal               -> Internal status
//   fail=null                   -> reports success with no object
#include <memory>
#include <stdexcept>

#include "gpuos/plugins/export.h"
#include "gpuos/plugins/scheduler.h"

namespace {

class NeverMade final : public gpuos::plugins::Scheduler {
 public:
  gpuos::Expected<std::vector<gpuos::plugins::TaskPlacement>> Schedule(
      std::span<const gpuos::plugins::ReadyTask>,
      std::span<const gpuos::plugins::DeviceLoad>) noexcept override {
    return gpuos::Internal("never made");
  }
};

gpuos::Expected<std::unique_ptr<NeverMade>> MakeFailing(
    const gpuos::plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({"fail"}));
  std::string mode = config.GetString("fail", "unavailable");
  if (mode == "throw") throw std::runtime_error("simulated driver crash");
  if (mode == "internal") return gpuos::Internal("simulated internal failure");
  if (mode == "null") return std::unique_ptr<NeverMade>();
  return gpuos::Unavailable("cannot open /dev/gpuos-test-accelerator: no such device");
}

}  // namespace

GPUOS_EXPORT_PLUGIN(gpuos::plugins::Scheduler, "test_failing_factory", "0.1.0",
                    "a factory that always fails", MakeFailing)
