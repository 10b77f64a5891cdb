// Linked into the instrumented build of `make code-order` only (`-Xlinker --wrap=_exit`): the worker ends a clean
// shutdown with _exit (exitAfterCleanShutdown, App/Observability/StandardOutput.swift), which skips the atexit handler
// that writes an instrumented binary's profile. Writes it first.
extern int __llvm_profile_write_file(void);
extern void __real__exit(int status) __attribute__((noreturn));

void __wrap__exit(int status) {
    __llvm_profile_write_file();
    __real__exit(status);
}
