#include "RunAtLoad.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

static volatile sig_atomic_t caught_at_load = 0;
static int arena_limit_at_load = 0;

static void iap_remember_stop_signal(int signo) {
    if (caught_at_load == 0) {
        caught_at_load = signo;
    }
}

// A handler, not a blocked mask: Swift's asynchronous main parks the main thread in sigsuspend with an empty mask,
// which would take a blocked signal by its default action anyway. The handler lasts until libdispatch installs its
// own for the signal sequence.
static void iap_catch_stop_signals(void) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = iap_remember_stop_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
}

// The value of `name` in `envp`, NULL when absent. Not getenv: at .preinit_array time the C library's own
// initialisers have not run, and its copy of the environment may not be set yet; the loader's envp is.
static const char *iap_environment_value(char **envp, const char *name) {
    size_t length = strlen(name);
    for (char **entry = envp; entry != NULL && *entry != NULL; entry++) {
        if (strncmp(*entry, name, length) == 0 && (*entry)[length] == '=') {
            return *entry + length + 1;
        }
    }
    return NULL;
}

// glibc gives each thread that allocates an arena of its own, up to eight per core, and an arena keeps what is freed
// in it for its own threads. The daemon runs about thirty threads (librdkafka's, the cooperative pool, NIO's event
// loops, GRDB's queues) that each allocate on a purchase's way: memory freed in one arena after a burst is not reused
// by the others, and the resident size ratchets up with every burst of a long run (issue #39: the soak grew for
// 17 minutes). Two to four arenas (one per online core within those bounds) serve a worker that keeps about one core
// busy: CPU per message measured the same with two (docs/benchmarks.md). Four at most because the count of online
// cores is the node's, not the container's share of it (a pod on a 64-core node would otherwise get 64, as many as
// glibc makes anyway). Set before any other thread exists, which only load time guarantees. An operator's own limit
// stays.
static void iap_limit_malloc_arenas(char **envp) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    const char *limit_set = iap_environment_value(envp, "MALLOC_ARENA_MAX");
    if (limit_set != NULL && limit_set[0] != '\0') {
        return;
    }
    const char *tunables = iap_environment_value(envp, "GLIBC_TUNABLES");
    if (tunables != NULL && strstr(tunables, "glibc.malloc.arena_max") != NULL) {
        return;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int limit = cores < 2 ? 2 : (cores > 4 ? 4 : (int)cores);
    if (mallopt(M_ARENA_MAX, limit) == 1) {
        arena_limit_at_load = limit;
    }
#else
    (void)envp;
#endif
}

// An executable's .preinit_array runs right after the dynamic loader's relocations, before any shared library's
// initialisers (Swift's runtime among them) and before main: the earliest moment a process can take charge of a
// signal, and a moment when it has no thread but its first. glibc calls it with (argc, argv, envp). Only `run` is
// concerned; every other command keeps the default actions (a Ctrl-C ends `iap-worker find` as a user expects) and
// the default allocator.
static void iap_run_at_load(int argc, char **argv, char **envp) {
    if (argc < 2 || argv == NULL || argv[1] == NULL || strcmp(argv[1], "run") != 0) {
        return;
    }
    iap_catch_stop_signals();
    iap_limit_malloc_arenas(envp);
}

__attribute__((section(".preinit_array"), used)) static void (*const iap_run_at_load_entry)(
    int, char **, char **) = iap_run_at_load;

int iap_stop_signal_caught_at_load(void) { return caught_at_load; }

int iap_malloc_arena_limit_at_load(void) { return arena_limit_at_load; }

int iap_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}
