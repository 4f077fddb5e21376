// Telling live runtimes about publishes and rollbacks, and asking them for
// their status, over the control socket (docs/control-socket.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../cli_support/output.h"
#include "gpuos/control/control_client.h"
#include "gpuos/control/protocol.h"

namespace gpuos::cli {

// One runtime's answer as JSON ({"socket", "result"} or {"socket", "error"})
// and the error text ("" when it answered ok).
nlohmann::json AnswerToJson(const control::RuntimeAnswer& answer, std::string* error);

// Sends `request` to every live runtime registered for `repository` and
// reports each answer (text: one line per runtime; nothing when there is
// none). Returns the answers as JSON for --json output. A runtime that fails
// or answers with an error is a warning, never a failure of the command:
// the repository change is already committed.
nlohmann::json NotifyRuntimes(const std::string& repository, const control::Request& request,
                              const Output& out);

}  // namespace gpuos::cli
