"""Builds and installs the `gpuos` Python package (docs/pytorch.md).

    pip install --no-build-isolation ./frontends/pytorch

builds the CMake target `gpuos_torch_bridge` of this repository (the gpuos
runtime behind a C API), then the extension `gpuos._C` against the installed
torch, and installs both. `--no-build-isolation` is required: the extension
is compiled against the torch you already have.

Environment:
  GPUOS_BUILD_DIR    CMake build directory to use (default <repo>/build/pytorch;
                     an existing build such as build/gpu works: only the bridge
                     target is built there)
  GPUOS_SOURCE_DIR   the repository root (default: two levels above this file)
  GPUOS_DEPS_PREFIX  offline dependency prefix passed to CMake
                     (default <repo>/.deps/prefix when it exists)
  GPUOS_JOBS         parallel build jobs (default: all cores)
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("GPUOS_SOURCE_DIR", HERE.parent.parent)).resolve()
BRIDGE = "libgpuos_torch_bridge.so"

try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit(
        "gpuos: torch is not importable by this Python. Install torch first, then run\n"
        "  pip install --no-build-isolation ./frontends/pytorch\n"
        "(without --no-build-isolation pip builds in an environment without torch)."
    )


def build_dir() -> Path:
    return Path(os.environ.get("GPUOS_BUILD_DIR", ROOT / "build" / "pytorch")).resolve()


def run(command, **kwargs):
    print("gpuos:", " ".join(str(c) for c in command), flush=True)
    subprocess.run([str(c) for c in command], check=True, **kwargs)


def build_bridge() -> Path:
    """Configures (when needed) and builds gpuos_torch_bridge; returns the .so."""
    if not (ROOT / "CMakeLists.txt").is_file() or not (ROOT / "frontends" / "pytorch").is_dir():
        sys.exit(
            f"gpuos: {ROOT} is not the gpuos repository; install from a checkout "
            "(pip install --no-build-isolation ./frontends/pytorch) or set GPUOS_SOURCE_DIR"
        )
    build = build_dir()
    if not (build / "CMakeCache.txt").is_file():
        configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                     "-DGPUOS_BUILD_TESTS=OFF", "-DGPUOS_WARNINGS_AS_ERRORS=OFF"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        deps = os.environ.get("GPUOS_DEPS_PREFIX", str(ROOT / ".deps" / "prefix"))
        if Path(deps).is_dir():
            configure.append(f"-DGPUOS_DEPS_PREFIX={deps}")
        cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        if Path(cuda).is_dir():
            configure.append(f"-DCUDAToolkit_ROOT={cuda}")
        run(configure)
    jobs = os.environ.get("GPUOS_JOBS", str(os.cpu_count() or 2))
    run(["cmake", "--build", build, "--target", "gpuos_torch_bridge", "-j", jobs])
    library = build / "lib" / BRIDGE
    if not library.is_file():
        sys.exit(f"gpuos: the build did not produce {library}")
    return library


class BuildWithBridge(BuildExtension):
    """Builds the bridge library first and installs it beside gpuos._C."""

    def run(self):
        library = build_bridge()
        for ext in self.extensions:
            ext.library_dirs.append(str(library.parent))
        super().run()
        for ext in self.extensions:
            target = Path(self.get_ext_fullpath(ext.name)).parent
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(library, target / BRIDGE)


setup(
    name="gpuos",
    version="0.1.0",
    description="PyTorch frontend of gpuos: compiled replay on a persistent GPU kernel",
    packages=["gpuos"],
    python_requires=">=3.9",
    ext_modules=[
        CppExtension(
            "gpuos._C",
            ["csrc/extension.cpp", "csrc/batching.cpp", "csrc/batching_python.cpp",
             "csrc/batching_recorder.cpp", "csrc/batching_recorder_learn.cpp",
             "csrc/batching_recorder_sign.cpp", "csrc/fast_call.cpp"],
            include_dirs=[str(HERE / "csrc")],
            libraries=["gpuos_torch_bridge"],
            extra_compile_args=["-O2"],
            # The bridge is installed next to _C.
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
        )
    ],
    cmdclass={"build_ext": BuildWithBridge},
    entry_points={"torch_dynamo_backends": ["gpuos = gpuos._compile:backend"]},
    zip_safe=False,
)
