// The runtime's end of the control socket (docs/control-socket.md,
// docs/live-update.md): `gpuos-registry publish` / `rollback` tell it that
// the repository changed, it refreshes (alias flips or an epoch switch) and
// answers with the outcome; `status` reports the active image and versions.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "gpuos/control/control_client.h"
#include "gpuos/control/control_server.h"
#include "runtime_impl.h"

namespace gpuos::runtime {
namespace {

nlohmann::json OutcomeToJson(const UpdateOutcome& outcome) {
  nlohmann::json activated = nlohmann::json::array();
  for (const auto& [name, version] : outcome.activated) {
    activated.push_back({{"name", name}, {"version", version}});
  }
  return {{"action", outcome.action},   {"activated", activated},
          {"reasons", outcome.reasons}, {"stage_ms", outcome.stage_ms},
          {"gap_us", outcome.gap_us},   {"quiesce_us", outcome.quiesce_us},
          {"load_us", outcome.load_us}, {"commit_us", outcome.commit_us},
          {"image", outcome.image_key}};
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code error;
  if (std::filesystem::equivalent(a, b, error)) return true;
  return std::filesystem::weakly_canonical(a, error) == std::filesystem::weakly_canonical(b, error);
}

class RuntimeControlHandler final : public control::ControlHandler {
 public:
  explicit RuntimeControlHandler(RuntimeImpl& runtime) : runtime_(runtime) {}

  Expected<nlohmann::json> Status() override {
    nlohmann::json operators = nlohmann::json::array();
    for (const ActiveOperator& op : runtime_.ActiveOperators()) {
      nlohmann::json in_image = nlohmann::json::array();
      for (const auto& v : op.in_image) in_image.push_back(v.ToString());
      operators.push_back(
          {{"name", op.name}, {"version", op.version.ToString()}, {"in_image", in_image}});
    }
    const RuntimeStats stats = runtime_.Stats();
    return nlohmann::json{{"pid", static_cast<long long>(::getpid())},
                          {"device", runtime_.device_name()},
                          {"image", runtime_.ImageKey()},
                          {"arch", runtime_.arch()},
                          {"operators", operators},
                          {"submissions", stats.submissions},
                          {"tasks", stats.tasks_submitted},
                          {"alias_flips", stats.alias_flips},
                          {"epoch_switches", stats.epoch_switches}};
  }
  Expected<nlohmann::json> Published(const control::Request& request) override {
    return Refresh(request);
  }
  Expected<nlohmann::json> RolledBack(const control::Request& request) override {
    return Refresh(request);
  }

 private:
  Expected<nlohmann::json> Refresh(const control::Request& request) {
    if (!SameFile(request.repository, runtime_.repository_path())) {
      return FailedPrecondition("this runtime uses the repository " + runtime_.repository_path() +
                                ", not " + request.repository);
    }
    GPUOS_ASSIGN_OR_RETURN(UpdateOutcome outcome, runtime_.Refresh());
    return OutcomeToJson(outcome);
  }

  RuntimeImpl& runtime_;
};

}  // namespace

Status RuntimeImpl::StartControlServer(const RuntimeConfig& config) {
  if (config.control_socket == "off") return Status::Ok();
  const bool from_repository = config.operators.empty() && config.pack_paths.empty();
  if (config.control_socket.empty() && (config.repository_path.empty() || !from_repository)) {
    return Status::Ok();  // nothing to be told: the operators do not come from a repository
  }
  control_handler_ = std::make_unique<RuntimeControlHandler>(*this);
  auto start = [&](const std::filesystem::path& path) {
    control::ControlServerOptions options;
    options.socket_path = path;
    options.handler = control_handler_.get();
    options.log = [](const std::string& line) {
      std::cerr << "gpuos control socket: " << line << "\n";
    };
    return control::ControlServer::Start(std::move(options));
  };
  const bool default_path = config.control_socket.empty();
  auto server = start(default_path ? control::RuntimeSocketPath(config.repository_path, ::getpid())
                                   : std::filesystem::path(config.control_socket));
  // Another runtime of this process on the same repository: <pid>-N.sock.
  for (int n = 2; default_path && !server.ok() &&
                  server.status().code() == StatusCode::kAlreadyExists && n <= 16;
       ++n) {
    server = start(control::RuntimeSocketPath(config.repository_path, ::getpid(), n));
  }
  if (!server.ok()) {
    return server.status().WithContext(
        "starting the control socket (set RuntimeConfig::control_socket to \"off\" to run "
        "without one)");
  }
  std::lock_guard<std::mutex> lock(control_mutex_);
  control_server_ = std::move(*server);
  return Status::Ok();
}

void RuntimeImpl::StopControlServer() {
  std::lock_guard<std::mutex> lock(control_mutex_);
  if (control_server_) control_server_->Stop();
  control_server_.reset();
}

std::string RuntimeImpl::control_socket_path() const {
  std::lock_guard<std::mutex> lock(control_mutex_);
  return control_server_ ? control_server_->socket_path().string() : std::string();
}

}  // namespace gpuos::runtime
