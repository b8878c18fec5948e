/*
 * LD_PRELOAD shim that lets valgrind 3.19 (Debian 12's) run a Swift program that uses async/await.
 *
 * The Swift concurrency runtime on Linux starts libdispatch, whose signal thread parks in
 * `sigsuspend(&mask)` with `mask` a `static const` in libdispatch's .rodata. valgrind 3.19's
 * rt_sigsuspend wrapper removes its own signals from the mask *in the client's memory* before the
 * call, so it writes to a read-only page and dies with "VALGRIND INTERNAL ERROR: ... SIGSEGV"
 * (faulting address: `_dispatch_sigsuspend.mask`) as soon as the first worker thread starts.
 * Later valgrind versions copy the mask; this shim does the same from the client side: it hands the
 * kernel a copy on the stack, which valgrind may then change. The program behaves exactly as before.
 *
 * Built and used by scripts/speed-bench.sh (row `instr`) only; never linked into httpdns.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}
