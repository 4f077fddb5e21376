// The C API of libgpuos_torch_bridge: what the Python extension gpuos._C
// calls (docs/pytorch.md). Plain C types only, so that the extension may be
// built with another libstdc++ string ABI than the library.
//
// Every function that can fail returns 0 on success, else a gpuos StatusCode
// value (gpuos/status.h), and leaves the message in this thread's
// gpuos_torch_last_error(). No function throws.
//
// Thread safety: a runtime may be used from any thread (the gpuos runtime
// serializes what it must). A program may be run from one thread at a time
// (its task graph's addresses are rebound at each run).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GpuosTorchRuntime GpuosTorchRuntime;
typedef struct GpuosTorchProgram GpuosTorchProgram;

// The message of the last failed call on this thread ("" when none). Valid
// until the next call on this thread.
const char* gpuos_torch_last_error(void);

// Opens the runtime on CUDA device `device` serving the built-in standard
// packs (operators/*.yaml, embedded), or the current operator set of the
// repository at `repository_path` when `use_repository` is nonzero.
// `cache_path` (may be "" or NULL) is the build cache for the built-in packs'
// image. `trace_capacity` > 0 makes the device keep that many task records
// for gpuos_torch_runtime_export_trace (RuntimeConfig::trace_capacity).
// Errors: Unavailable with "no CUDA device: ..." without a driver or GPU;
// the JIT's and the repository's errors.
int gpuos_torch_runtime_open(int device, const char* repository_path, int use_repository,
                             const char* cache_path, unsigned int trace_capacity,
                             GpuosTorchRuntime** out);
// Writes the device's task timeline as a Chrome trace to `path`
// (Runtime::ExportChromeTrace). Errors: FailedPrecondition when the runtime
// was opened with trace_capacity 0; I/O errors naming the file.
int gpuos_torch_runtime_export_trace(GpuosTorchRuntime* runtime, const char* path);
// Shuts the runtime down and frees it. REQUIRES: every program of it was
// destroyed. NULL is ignored.
void gpuos_torch_runtime_close(GpuosTorchRuntime* runtime);
// The runtime's statistics as a JSON object (submissions, tasks_submitted,
// tasks_per_operator, ...). The caller frees the text with
// gpuos_torch_free_string. NULL on failure.
char* gpuos_torch_runtime_stats_json(GpuosTorchRuntime* runtime);
void gpuos_torch_free_string(char* text);

// Builds a program (one task graph, submitted once per run) from the JSON
// description made by gpuos/_lowering.py (docs/pytorch.md, "Program
// format"). Tensor addresses are not known yet: each tensor names a buffer
// and an element offset into it; gpuos_torch_program_launch binds the buffers.
// Unless GPUOS_STITCH=0, a program of two or more tasks that can be
// stitched becomes one task of a stitched operator served for it (an epoch
// switch at creation; docs/pytorch.md, "Stitched programs").
// Errors: InvalidArgument naming the task and what is wrong; NotFound for an
// operator or dtype the image does not have.
int gpuos_torch_program_create(GpuosTorchRuntime* runtime, const char* program_json,
                               GpuosTorchProgram** out);
// Whether the program is stitched (1) or runs one task per operator (0).
int gpuos_torch_program_stitched(const GpuosTorchProgram* program);
// The stitched operator and its stages, or why the program is not stitched
// ("" when stitching was not tried). Owned by the program.
const char* gpuos_torch_program_stitch_note(const GpuosTorchProgram* program);
// Checks a program description without a runtime or GPU (parsing, shapes,
// buffer indices, dependencies). Same errors as create, except those that need
// the image (unknown operators, arity).
int gpuos_torch_program_check(const char* program_json);
// Binds buffer k to device address addresses[k] (element 0 of the buffer)
// and submits the program once, ordered on `stream` (a CUstream of the
// runtime's device; NULL = the legacy default stream, PyTorch's default):
// the program starts after the work enqueued on `stream` so far (the host
// synchronizes `stream` first when it has unfinished work), and work
// enqueued on `stream` afterwards starts after the program: the host waits
// for the program up to GPUOS_TORCH_HOST_WAIT_US (default 500 us), and when
// it is not done by then, the stream waits for it on the device and the
// call returns (on a device without 64-bit stream memory operations the
// host waits to the end). A failed task surfaces at the program's next
// launch, whose error it then is (or at this one when the host saw it
// finish).
// REQUIRES: num_buffers equals the program's buffer count; every address is
// valid device memory of the runtime's device, large enough for the views the
// program makes of it.
int gpuos_torch_program_launch(GpuosTorchProgram* program, const unsigned long long* addresses,
                               unsigned int num_buffers, void* stream);
// gpuos_torch_program_launch in two calls: start returns once the run may
// start (ordered after `stream`'s work so far), finish does the rest (the
// wait for it, and ordering `stream`'s later work after it), so that what
// the caller does in between overlaps the run. Each start is followed by
// one finish before the program's next start. Errors: launch's, split
// between the two; finish without a start: FailedPrecondition.
int gpuos_torch_program_start(GpuosTorchProgram* program, const unsigned long long* addresses,
                              unsigned int num_buffers, void* stream);
int gpuos_torch_program_finish(GpuosTorchProgram* program);
// Runtime::KeepWarm for the program's runtime: a parked worker is launched
// now, a running one stays up for another idle period (a launch expected
// soon, e.g. at the end of a batching replay).
int gpuos_torch_program_keep_warm(GpuosTorchProgram* program);
// Testing only: Program::TestingOnlySetFinishedRuns (a stitched program's
// next run, if a stage of it waits for another's count rather than flags,
// then fails after the stage wait's limit, 2 s).
int gpuos_torch_program_testing_set_finished_runs(GpuosTorchProgram* program,
                                                  unsigned long long runs);
// 1 when no launch of the program is still running or unseen (the last
// one's results were seen on the host), so the buffers it was bound to are
// free of gpuos's use; 0 otherwise (NULL too).
int gpuos_torch_program_idle(const GpuosTorchProgram* program);
unsigned int gpuos_torch_program_num_tasks(const GpuosTorchProgram* program);
unsigned int gpuos_torch_program_num_buffers(const GpuosTorchProgram* program);
void gpuos_torch_program_destroy(GpuosTorchProgram* program);

// The host-timing diagnostic (GPUOS_TORCH_HOST_TIMING; docs/pytorch.md): whether
// it is on, and a duration the torch extension measured of one of its own
// steps (GPUOS_TORCH_STEP_ALLOCATE, GPUOS_TORCH_STEP_RUN; others are ignored).
#define GPUOS_TORCH_STEP_ALLOCATE 5
#define GPUOS_TORCH_STEP_RUN 6
int gpuos_torch_host_timing_on(void);
void gpuos_torch_host_timing_add(int step, unsigned long long ns);

#ifdef __cplusplus
}  // extern "C"
#endif
