// A frontend for a tiny line format, to exercise the frontend kind:
//   tensor <name> <dtype> <dim>...
//   op <operator> <input>... -> <output>... [<attribute>=<value>...]
//   output <name>
// Blank lines and lines starting with '#' are ignored. Errors name
// "<file>:<line>".
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gpuos/plugins/export.h"
#include "gpuos/plugins/frontend.h"

namespace {

using gpuos::Status;
using gpuos::plugins::GraphBuilder;
using gpuos::plugins::OperationAttribute;

class LineFrontend final : public gpuos::plugins::Frontend {
 public:
  std::string_view Format() const noexcept override { return "gpuos-test-lines"; }

  Status Import(std::string_view source, GraphBuilder& builder) noexcept override {
    try {
      return ImportFile(std::string(source), builder);
    } catch (const std::exception& exception) {
      return gpuos::Internal(std::string(source) + ": " + exception.what());
    }
  }

 private:
  static Status ImportFile(const std::string& path, GraphBuilder& builder) {
    std::ifstream file(path);
    if (!file) return gpuos::NotFound(path + ": cannot open the model file");
    std::map<std::string, std::uint32_t> tensors;
    std::string line;
    for (int number = 1; std::getline(file, line); ++number) {
      const std::string where = path + ":" + std::to_string(number) + ": ";
      std::istringstream words(line);
      std::string command;
      if (!(words >> command) || command.front() == '#') continue;
      auto lookup = [&](const std::string& name) -> gpuos::Expected<std::uint32_t> {
        auto found = tensors.find(name);
        if (found == tensors.end())
          return gpuos::InvalidArgument(where + "unknown tensor '" + name + "'");
        return found->second;
      };
      if (command == "tensor") {
        std::string name, dtype_name;
        words >> name >> dtype_name;
        std::optional<gpuos::DType> dtype = gpuos::ParseDType(dtype_name);
        if (!dtype) return gpuos::InvalidArgument(where + "unknown dtype '" + dtype_name + "'");
        std::vector<std::int64_t> shape;
        for (std::int64_t dim; words >> dim;) shape.push_back(dim);
        GPUOS_ASSIGN_OR_RETURN(std::uint32_t id, builder.AddTensor(name, *dtype, shape));
        tensors[name] = id;
      } else if (command == "op") {
        std::string op;
        words >> op;
        std::vector<std::uint32_t> inputs, outputs;
        std::vector<std::string> attribute_text;
        bool after_arrow = false;
        for (std::string word; words >> word;) {
          if (word == "->") {
            after_arrow = true;
          } else if (word.find('=') != std::string::npos) {
            attribute_text.push_back(word);
          } else {
            GPUOS_ASSIGN_OR_RETURN(std::uint32_t id, lookup(word));
            (after_arrow ? outputs : inputs).push_back(id);
          }
        }
        std::vector<OperationAttribute> attributes;
        for (const std::string& text : attribute_text) {
          std::string_view view = text;
          std::size_t equals = view.find('=');
          attributes.push_back({view.substr(0, equals), view.substr(equals + 1)});
        }
        auto added = builder.AddOperation(op, inputs, outputs, attributes);
        if (!added.ok()) return added.status().WithContext(where.substr(0, where.size() - 2));
      } else if (command == "output") {
        std::string name;
        words >> name;
        GPUOS_ASSIGN_OR_RETURN(std::uint32_t id, lookup(name));
        GPUOS_RETURN_IF_ERROR(builder.MarkOutput(id));
      } else {
        return gpuos::InvalidArgument(where + "unknown command '" + command +
                                      "'; expected tensor, op or output");
      }
    }
    return Status::Ok();
  }
};

gpuos::Expected<std::unique_ptr<LineFrontend>> MakeLineFrontend(
    const gpuos::plugins::PluginConfig& config) {
  GPUOS_RETURN_IF_ERROR(config.CheckKeys({}));
  return std::make_unique<LineFrontend>();
}

}  // namespace

GPUOS_EXPORT_PLUGIN(gpuos::plugins::Frontend, "test_lines", "0.1.0",
                    "reads the tiny line format of the plugin tests", MakeLineFrontend)
