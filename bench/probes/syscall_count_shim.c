/* LD_PRELOAD shim for host-timed probes: counts the process's ioctl and
 * sched_yield calls made through libc's exported symbols (the usual ways a
 * CUDA user-mode driver enters the kernel driver or gives up its CPU) and
 * forwards each to libc. It does not see raw syscall() calls, libc's
 * internal calls, other system calls or page faults: a probe that wants all
 * kernel time reads getrusage beside it (stream_query_cost.cu does both). A
 * probe that finds probe_syscall_counts with dlsym(RTLD_DEFAULT, ...) can
 * tell how many of each one of its CUDA calls made. Counts are process-wide
 * (the driver's own threads included, so they can only over-count a call)
 * and relaxed.
 *
 *   gcc -O2 -shared -fPIC bench/probes/syscall_count_shim.c -ldl \
 *     -o /tmp/syscall_count_shim.so
 *   LD_PRELOAD=/tmp/syscall_count_shim.so /tmp/query_probe
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_sched_yield)(void);
static unsigned long ioctls;
static unsigned long yields;

/* Resolved once, before main and before any driver thread exists. */
__attribute__((constructor)) static void resolve(void) {
  real_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
  real_sched_yield = (int (*)(void))dlsym(RTLD_NEXT, "sched_yield");
  if (real_ioctl == NULL || real_sched_yield == NULL) {
    fprintf(stderr, "syscall_count_shim: libc's ioctl or sched_yield not found\n");
    abort();
  }
}

/* The third argument forwarded as the register it came in (what glibc's own
 * wrapper does); NVIDIA's ioctls pass pointers. */
int ioctl(int fd, unsigned long request, ...) {
  va_list args;
  va_start(args, request);
  void* argument = va_arg(args, void*);
  va_end(args);
  __atomic_fetch_add(&ioctls, 1ul, __ATOMIC_RELAXED);
  return real_ioctl(fd, request, argument);
}

int sched_yield(void) {
  __atomic_fetch_add(&yields, 1ul, __ATOMIC_RELAXED);
  return real_sched_yield();
}

void probe_syscall_counts(unsigned long* ioctl_count, unsigned long* yield_count) {
  *ioctl_count = __atomic_load_n(&ioctls, __ATOMIC_RELAXED);
  *yield_count = __atomic_load_n(&yields, __ATOMIC_RELAXED);
}
