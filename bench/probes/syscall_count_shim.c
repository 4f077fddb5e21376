/* LD_PRELOAD shim for host-timed probes: counts the process's ioctl and
 * sched_yield calls (the ways a CUDA user-mode driver enters the kernel
 * driver or gives up its CPU) and forwards each to libc. A probe that finds
 * probe_syscall_counts with dlsym(RTLD_DEFAULT, ...) can tell how many of
 * each one of its CUDA calls made (stream_query_cost.cu does). Counts are
 * process-wide (the driver's own threads included) and relaxed.
 *
 *   gcc -O2 -shared -fPIC bench/probes/syscall_count_shim.c -ldl \
 *     -o /tmp/syscall_count_shim.so
 *   LD_PRELOAD=/tmp/syscall_count_shim.so /tmp/query_probe
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>

static unsigned long ioctls;
static unsigned long yields;

int ioctl(int fd, unsigned long request, ...) {
  static int (*real)(int, unsigned long, void*);
  if (real == 0) real = (int (*)(int, unsigned long, void*))dlsym(RTLD_NEXT, "ioctl");
  va_list args;
  va_start(args, request);
  void* argument = va_arg(args, void*);
  va_end(args);
  __atomic_fetch_add(&ioctls, 1ul, __ATOMIC_RELAXED);
  return real(fd, request, argument);
}

int sched_yield(void) {
  static int (*real)(void);
  if (real == 0) real = (int (*)(void))dlsym(RTLD_NEXT, "sched_yield");
  __atomic_fetch_add(&yields, 1ul, __ATOMIC_RELAXED);
  return real();
}

void probe_syscall_counts(unsigned long* ioctl_count, unsigned long* yield_count) {
  *ioctl_count = __atomic_load_n(&ioctls, __ATOMIC_RELAXED);
  *yield_count = __atomic_load_n(&yields, __ATOMIC_RELAXED);
}
