#include "StopSignalsAtLoad.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t caught_at_load = 0;

static void iap_remember_stop_signal(int signo) {
    if (caught_at_load == 0) {
        caught_at_load = signo;
    }
}

// An executable's .preinit_array runs right after the dynamic loader's relocations, before any shared library's
// initialisers (Swift's runtime among them) and before main: the earliest moment a process can take charge of a
// signal. glibc calls it with (argc, argv, envp). Only `run` is concerned; every other command keeps the default
// actions (a Ctrl-C ends `iap-worker find` as a user expects).
//
// A handler, not a blocked mask: Swift's asynchronous main parks the main thread in sigsuspend with an empty mask,
// which would take a blocked signal by its default action anyway. The handler lasts until libdispatch installs its
// own for the signal sequence.
static void iap_catch_stop_signals(int argc, char **argv, char **envp) {
    (void)envp;
    if (argc < 2 || argv == NULL || argv[1] == NULL || strcmp(argv[1], "run") != 0) {
        return;
    }
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = iap_remember_stop_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
}

__attribute__((section(".preinit_array"), used)) static void (*const iap_catch_stop_signals_at_load)(
    int, char **, char **) = iap_catch_stop_signals;

int iap_stop_signal_caught_at_load(void) { return caught_at_load; }
