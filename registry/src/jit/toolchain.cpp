#include "toolchain.h"

#include <dlfcn.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>

#include "gpuos/content_hash.h"
#include "gpuos/device/abi.h"
#include "gpuos/embedded_sets.h"
#include "gpuos/environment.h"

namespace gpuos::registry::jit {
namespace {

std::string JoinNumbers(const std::vector<int>& numbers) {
  std::string out;
  for (int n : numbers) out += (out.empty() ? "" : " ") + std::to_string(n);
  return out;
}

std::string NvrtcLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

std::string NvJitLinkLog(nvJitLinkHandle handle) {
  size_t size = 0;
  if (nvJitLinkGetErrorLogSize(handle, &size) != NVJITLINK_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvJitLinkGetErrorLog(handle, log.data()) != NVJITLINK_SUCCESS) return "";
  log.resize(size - 1);
  return log;
}

bool HasFp16Headers(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / "cuda_fp16.h", ec) &&
         std::filesystem::is_regular_file(dir / "cuda_bf16.h", ec);
}

std::vector<std::filesystem::path> IncludeDirCandidates() {
  std::vector<std::filesystem::path> dirs;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto root = GetEnv(variable)) dirs.push_back(std::filesystem::path(*root) / "include");
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    const std::filesystem::path library = std::filesystem::canonical(info.dli_fname, ec);
    if (!ec) {
      // <root>/lib64/libnvrtc.so and <root>/targets/<triple>/lib/libnvrtc.so
      dirs.push_back(library.parent_path().parent_path() / "include");
      dirs.push_back(library.parent_path().parent_path().parent_path().parent_path() / "include");
    }
  }
  dirs.push_back("/usr/local/cuda/include");
  dirs.push_back("/usr/include");
  return dirs;
}

struct DeviceFiles {
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<GeneratedSource> runtime;
  std::string digest;
};

const DeviceFiles& Device() {
  static const DeviceFiles files = [] {
    DeviceFiles out;
    ContentHasher hasher;
    for (const EmbeddedFile& file : device_sources::EmbeddedFiles()) {
      hasher.Add(file.name).Add(file.contents);
      const std::string name(file.name);
      const std::string include_prefix = "include/";
      if (name.rfind(include_prefix, 0) == 0) {
        out.headers.emplace_back(name.substr(include_prefix.size()), std::string(file.contents));
      } else if (name.rfind("src/", 0) == 0 && name.size() > 3 &&
                 name.compare(name.size() - 3, 3, ".cu") == 0) {
        out.runtime.push_back(GeneratedSource{"device/" + name, std::string(file.contents)});
      }
    }
    std::sort(out.runtime.begin(), out.runtime.end(),
              [](const GeneratedSource& a, const GeneratedSource& b) {
                return a.program_name < b.program_name;
              });
    out.digest = hasher.Finish();
    return out;
  }();
  return files;
}

// GPUOS_OPERATOR_PRESERVE as a register count (0-255), if set; a value that
// is not one is reported once and ignored.
std::optional<int> OperatorPreserveFromEnv() {
  const std::optional<std::string> value = GetEnv("GPUOS_OPERATOR_PRESERVE");
  if (!value) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(value->c_str(), &end, 10);
  if (end != nullptr && *end == '\0' && n >= 0 && n <= 255) return static_cast<int>(n);
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::fprintf(stderr,
                 "gpuos: GPUOS_OPERATOR_PRESERVE=%s is not a register count from 0 to 255; "
                 "ignored\n",
                 value->c_str());
  });
  return std::nullopt;
}

// Whether `entry` is NAME or NAME=VALUE with NAME an ASCII C identifier
// (VALUE has no blanks: GPUOS_JIT_DEFINES is split at them) that is not one
// of the macros NvrtcOptions sets itself (the LTO guard and the range check
// of GPUOS_OPERATOR_PRESERVE must not be bypassed).
bool IsDefine(const std::string& entry) {
  const std::string name = entry.substr(0, entry.find('='));
  const auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (name.empty() || !letter(name[0])) return false;
  if (name == "GPUOS_OPERATOR_PRESERVE" || name == "GPUOS_PHASE_TIMING") return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

// GPUOS_JIT_DEFINES as NVRTC -D options, in order; entries that are not
// NAME or NAME=VALUE are reported once and left out.
std::vector<std::string> JitDefinesFromEnv() {
  std::vector<std::string> defines;
  const std::optional<std::string> value = GetEnv("GPUOS_JIT_DEFINES");
  if (!value) return defines;
  std::istringstream entries(*value);
  std::string entry;
  std::string rejected;
  while (entries >> entry) {
    if (IsDefine(entry)) {
      defines.push_back("-D" + entry);
    } else {
      rejected += (rejected.empty() ? "" : " ") + entry;
    }
  }
  if (!rejected.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr,
                   "gpuos: GPUOS_JIT_DEFINES: '%s' is not NAME or NAME=VALUE (NAME a C "
                   "identifier other than GPUOS_OPERATOR_PRESERVE and GPUOS_PHASE_TIMING, "
                   "which have variables of their own); left out\n",
                   rejected.c_str());
    });
  }
  return defines;
}

}  // namespace

std::string NvrtcVersion() {
  int major = 0;
  int minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string NvJitLinkVersion() {
  unsigned int major = 0;
  unsigned int minor = 0;
  if (nvJitLinkVersion(&major, &minor) != NVJITLINK_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

const std::vector<int>& SupportedArchNumbers() {
  static const std::vector<int> archs = [] {
    int count = 0;
    std::vector<int> out;
    if (nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
      out.resize(static_cast<std::size_t>(count));
      if (nvrtcGetSupportedArchs(out.data()) != NVRTC_SUCCESS) out.clear();
    }
    return out;
  }();
  return archs;
}

Status CheckArch(const std::string& arch) {
  const std::vector<int>& supported = SupportedArchNumbers();
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("unknown target architecture '" + arch + "': " + why +
                           "; use sm_<N> with N one of " + JoinNumbers(supported) + " (NVRTC " +
                           NvrtcVersion() +
                           "), or sm_<N>a for N >= 90, sm_<N>f for N >= 100 "
                           "(pass --arch or set GPUOS_ARCH)");
  };
  if (arch.rfind("sm_", 0) != 0) return refuse("it does not start with sm_");
  std::string digits = arch.substr(3);
  char suffix = '\0';
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    suffix = digits.back();
    digits.pop_back();
  }
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return refuse("expected digits after sm_");
  }
  const int number = std::stoi(digits);
  bool known = false;
  for (int n : supported) known = known || n == number;
  if (!known) return refuse("NVRTC " + NvrtcVersion() + " cannot target it");
  if (suffix == 'a' && number < 90) return refuse("the 'a' variants start at sm_90a");
  if (suffix == 'f' && number < 100) return refuse("the 'f' variants start at sm_100f");
  return Status::Ok();
}

Expected<std::string> ToolkitIncludeDir() {
  static std::once_flag once;
  static Expected<std::string> result = Unavailable("not looked up");
  std::call_once(once, [] {
    std::string tried;
    for (const std::filesystem::path& dir : IncludeDirCandidates()) {
      if (HasFp16Headers(dir)) {
        result = dir.string();
        return;
      }
      tried += (tried.empty() ? "" : ", ") + dir.string();
    }
    result =
        Unavailable("CUDA toolkit headers not found: cuda_fp16.h and cuda_bf16.h are in none of " +
                    tried + "; set CUDA_HOME to the CUDA toolkit's root directory");
  });
  return result;
}

const std::vector<std::pair<std::string, std::string>>& DeviceHeaders() { return Device().headers; }
const std::string& DeviceSourcesDigest() { return Device().digest; }
const std::vector<GeneratedSource>& DeviceRuntimeSources() { return Device().runtime; }

std::vector<std::string> NvrtcOptions(const std::string& arch, LinkMode mode) {
  std::vector<std::string> options = {"-arch=" + arch, "-rdc=true", "-std=c++17"};
  if (mode == LinkMode::kLto) options.push_back("-dlto");
  // Every unit, the worker and each operator it calls: the linker gives the
  // worker kernel the most registers any function it may call uses, and
  // what the worker leaves of an SM is all other kernels get while it runs
  // (device/abi.h, kWorkerMaxRegisters).
  options.push_back("-maxrregcount=" + std::to_string(device::kWorkerMaxRegisters));
  // Diagnostic per-phase timing (gpuos/device/phase_timing.cuh); being an
  // option, it is part of every unit's cache key.
  if (EnvFlagOn("GPUOS_PHASE_TIMING")) {
    options.push_back("-DGPUOS_PHASE_TIMING=1");
  }
  // The registers an operator preserves for its caller (GPUOS_OPERATOR_ABI
  // in gpuos/device/op_call.cuh; 0 = the default ABI). LTO images keep the
  // default ABI: nvJitLink 13.0's LTO drops the convention from the operator
  // table's declarations and then rejects the image ("Inconsistent
  // prototypes"). Otherwise GPUOS_OPERATOR_PRESERVE may set it (diagnostic).
  if (mode == LinkMode::kLto) {
    options.push_back("-DGPUOS_OPERATOR_PRESERVE=0");
  } else if (const std::optional<int> preserve = OperatorPreserveFromEnv()) {
    options.push_back("-DGPUOS_OPERATOR_PRESERVE=" + std::to_string(*preserve));
  }
  // Diagnostic: ptxas's register and stack-frame report for every unit,
  // printed to stderr as each unit compiles (GPUOS_PTXAS_INFO=1). An operator
  // whose stack frame is large pays for it on every call: the indirect call's
  // callee-saved registers are stored and reloaded by every thread.
  if (EnvFlagOn("GPUOS_PTXAS_INFO")) {
    options.push_back("-Xptxas=-v");
  }
  // Diagnostic: macros for the device code (experiments with a constant of
  // device/include, e.g. matmul_few_rows.cuh's GPUOS_FEW_ROWS_ONE_ROW_UNROLL),
  // in the cache key like every option.
  for (std::string& define : JitDefinesFromEnv()) options.push_back(std::move(define));
  return options;
}

std::vector<std::string> NvJitLinkOptions(const std::string& arch, LinkMode mode) {
  std::vector<std::string> options = {"-arch=" + arch};
  if (mode == LinkMode::kLto) options.push_back("-lto");
  // LTO compiles the whole image again here: the same cap (NvrtcOptions).
  options.push_back("-maxrregcount=" + std::to_string(device::kWorkerMaxRegisters));
  return options;
}

namespace {

// Diagnostic: each compiled unit's source and object (a cubin to
// disassemble with nvdisasm, or LTO-IR) written to GPUOS_JIT_DUMP_DIR as
// <program name>.cu and .cubin / .ltoir. A unit that cannot be written is
// reported on stderr; the build goes on.
void DumpUnit(const GeneratedSource& source, const std::string& object, bool lto) {
  const std::optional<std::string> dir = GetEnv("GPUOS_JIT_DUMP_DIR");
  if (!dir || dir->empty()) return;
  const std::filesystem::path base = std::filesystem::path(*dir) / source.program_name;
  std::error_code error;  // a directory not made shows as files not written
  std::filesystem::create_directories(base.parent_path(), error);  // "device/src/..." too
  const std::pair<std::filesystem::path, const std::string*> files[] = {
      {std::filesystem::path(base).replace_extension(".cu"), &source.source},
      {std::filesystem::path(base).replace_extension(lto ? ".ltoir" : ".cubin"), &object}};
  for (const auto& [path, contents] : files) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool written =
        f != nullptr && std::fwrite(contents->data(), 1, contents->size(), f) == contents->size();
    if (f != nullptr) std::fclose(f);
    if (!written) std::fprintf(stderr, "GPUOS_JIT_DUMP_DIR: could not write %s\n", path.c_str());
  }
}

}  // namespace

Expected<std::string> CompileUnit(const GeneratedSource& source, const std::string& arch,
                                  LinkMode mode) {
  GPUOS_ASSIGN_OR_RETURN(const std::string include_dir, ToolkitIncludeDir());
  const auto& headers = DeviceHeaders();
  std::vector<const char*> header_sources;
  std::vector<const char*> header_names;
  for (const auto& [name, contents] : headers) {
    header_names.push_back(name.c_str());
    header_sources.push_back(contents.c_str());
  }
  nvrtcProgram program = nullptr;
  nvrtcResult result = nvrtcCreateProgram(
      &program, source.source.c_str(), source.program_name.c_str(),
      static_cast<int>(headers.size()), header_sources.data(), header_names.data());
  if (result != NVRTC_SUCCESS) {
    return Internal("nvrtcCreateProgram(" + source.program_name +
                    ") failed: " + nvrtcGetErrorString(result));
  }
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(
      &program, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  std::vector<std::string> options = NvrtcOptions(arch, mode);
  options.push_back("-I" + include_dir);
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  result = nvrtcCompileProgram(program, static_cast<int>(option_pointers.size()),
                               option_pointers.data());
  if (result != NVRTC_SUCCESS) {
    std::string log = RewriteNvrtcLog(NvrtcLog(program));
    if (log.empty()) log = nvrtcGetErrorString(result);
    return CompileError(log);
  }
  if (EnvFlagOn("GPUOS_PTXAS_INFO")) {
    std::fprintf(stderr, "%s: %s\n", source.program_name.c_str(), NvrtcLog(program).c_str());
  }
  const bool lto = mode == LinkMode::kLto;
  size_t size = 0;
  result = lto ? nvrtcGetLTOIRSize(program, &size) : nvrtcGetCUBINSize(program, &size);
  std::string object(size, '\0');
  if (result == NVRTC_SUCCESS) {
    result = lto ? nvrtcGetLTOIR(program, object.data()) : nvrtcGetCUBIN(program, object.data());
  }
  if (result != NVRTC_SUCCESS || size == 0) {
    return Internal(std::string("NVRTC produced no ") + (lto ? "LTO-IR" : "cubin") + " for " +
                    source.program_name + ": " + nvrtcGetErrorString(result));
  }
  DumpUnit(source, object, lto);
  return object;
}

Expected<std::string> LinkCubin(const std::vector<LinkInput>& inputs, const std::string& arch,
                                LinkMode mode) {
  const std::vector<std::string> options = NvJitLinkOptions(arch, mode);
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  nvJitLinkHandle handle = nullptr;
  nvJitLinkResult result = nvJitLinkCreate(&handle, static_cast<uint32_t>(option_pointers.size()),
                                           option_pointers.data());
  if (result != NVJITLINK_SUCCESS) {
    return CompileError("nvJitLink " + NvJitLinkVersion() + " refused options for " + arch +
                        " (nvJitLinkResult " + std::to_string(static_cast<int>(result)) + ")");
  }
  std::unique_ptr<nvJitLinkHandle, void (*)(nvJitLinkHandle*)> guard(
      &handle, [](nvJitLinkHandle* h) { nvJitLinkDestroy(h); });
  auto failure = [&](const std::string& stage) {
    std::string log = NvJitLinkLog(handle);
    return CompileError("nvJitLink " + NvJitLinkVersion() +
                        " failed to link the kernel image for " + arch + " (" + stage +
                        ", nvJitLinkResult " + std::to_string(static_cast<int>(result)) + ")" +
                        (log.empty() ? std::string() : ":\n" + log));
  };
  const nvJitLinkInputType type =
      mode == LinkMode::kLto ? NVJITLINK_INPUT_LTOIR : NVJITLINK_INPUT_CUBIN;
  for (const LinkInput& input : inputs) {
    result = nvJitLinkAddData(handle, type, input.object.data(), input.object.size(),
                              input.name.c_str());
    if (result != NVJITLINK_SUCCESS) return failure("adding " + input.name);
  }
  result = nvJitLinkComplete(handle);
  if (result != NVJITLINK_SUCCESS) return failure("linking");
  size_t size = 0;
  result = nvJitLinkGetLinkedCubinSize(handle, &size);
  if (result != NVJITLINK_SUCCESS) return failure("reading the cubin size");
  std::string cubin(size, '\0');
  result = nvJitLinkGetLinkedCubin(handle, cubin.data());
  if (result != NVJITLINK_SUCCESS) return failure("reading the cubin");
  return cubin;
}

}  // namespace gpuos::registry::jit
