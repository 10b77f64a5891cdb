import Foundation

/// A wall clock a test steps under a process it starts: Debian's libfaketime, reading its offset from a file the test
/// rewrites (`+0`, `-1h`, `+1h`), with the monotonic clocks left alone (`DONT_FAKE_MONOTONIC`), as a real step
/// leaves them.
///
/// Two faults of libfaketime 0.9.10 are worked around, so that what the test sees is the worker's behaviour:
/// - it moves every absolute `timerfd_settime` deadline by its offset, whatever the timer's clock, so a
///   `CLOCK_MONOTONIC` timer (libdispatch's: every `Task.sleep`) fires an hour late after a step back; and it refuses
///   an absolute `clock_nanosleep` on a monotonic clock (wolfcw/libfaketime#426). A small library preloaded before it
///   sends the monotonic clocks' calls straight to the kernel.
/// - a wall-clock wait (`pthread_cond_timedwait`, C11's `cnd_timedwait`) has its deadline in the faked time but waits
///   on the real clock: C11's is not converted at all (a step forward of an hour makes every wait an hour long), and
///   libfaketime converts the other once, when the wait starts, whereas the kernel reads a stepped wall clock again.
///   librdkafka waits on the wall clock (confluentinc/librdkafka#2145): its threads would hang past the test. The
///   library waits in slices of 50 ms of the monotonic clock instead, reading the faked wall clock after each.
/// - its initialiser adds `FAKETIME_SHARED` to the environment, and a Swift program finds its arguments through
///   `environ` at load (swiftlang/swift#76080): started directly, the program would see none. It is started through a
///   shell (preloaded too, so the variable is set before the program's initialiser runs) that `exec`s it.
struct FakeWallClock {
    /// libfaketime's multi-threaded library, where Debian puts it.
    static let library = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    ].first { FileManager.default.fileExists(atPath: $0) }

    static var isAvailable: Bool { library != nil && compiler != nil }

    static let compiler = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    let offsetFile: URL
    let environment: [String: String]

    /// Builds the monotonic-clock library in `folder` and starts the clock at the real time (`+0`).
    init(folder: URL) throws {
        guard let library = Self.library, let compiler = Self.compiler else {
            throw ProcessTestError("libfaketime or a C compiler is missing")
        }
        let source = folder.appendingPathComponent("monotonic-passthrough.c")
        let shim = folder.appendingPathComponent("monotonic-passthrough.so")
        try Data(Self.passthroughSource.utf8).write(to: source)
        let build = Process()
        build.executableURL = URL(fileURLWithPath: compiler)
        build.arguments = ["-shared", "-fPIC", "-O1", "-o", shim.path, source.path, "-ldl"]
        try build.run()
        build.waitUntilExit()
        guard build.terminationStatus == 0 else { throw ProcessTestError("\(compiler) could not build \(source.path)") }
        offsetFile = folder.appendingPathComponent("faketime")
        environment = [
            "LD_PRELOAD": "\(shim.path):\(library)", "FAKETIME_TIMESTAMP_FILE": offsetFile.path,
            "FAKETIME_NO_CACHE": "1", "DONT_FAKE_MONOTONIC": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        ]
        try set("+0")
    }

    /// Steps the clock to `offset` from the real time (libfaketime's syntax: `+0`, `-1h`, `+1h`).
    func set(_ offset: String) throws {
        try Data((offset + "\n").utf8).write(to: offsetFile, options: .atomic)
    }

    /// `iap-worker run` (or the build `IAP_WORKER_RUN_BIN` names) on this clock.
    func worker(_ name: String, _ environment: [String: String], folder: URL) throws -> ChildProcess {
        let worker = ProcessInfo.processInfo.environment["IAP_WORKER_RUN_BIN"] ?? ChildProcess.executable
        return try ChildProcess(
            name, ["-c", #"exec "$0" run"#, worker], environment: environment.merging(self.environment) { $1 },
            folder: folder, executable: "/bin/sh")
    }

    /// Removes the semaphore and shared memory libfaketime made for a process (named by its pid, which `exec` kept).
    static func removeSharedMemory(of process: ChildProcess) {
        for name in ["sem.faketime_sem_\(process.pid)", "faketime_shm_\(process.pid)"] {
            try? FileManager.default.removeItem(atPath: "/dev/shm/\(name)")
        }
    }

    static let passthroughSource = #"""
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <errno.h>
        #include <pthread.h>
        #include <stdatomic.h>
        #include <stdint.h>
        #include <sys/syscall.h>
        #include <sys/timerfd.h>
        #include <threads.h>
        #include <time.h>
        #include <unistd.h>

        /* The clock of each timer descriptor (plus one; 0: not a timer this library saw made). */
        static int clock_of[65536];

        int timerfd_create(int clockid, int flags) {
            int fd = (int)syscall(SYS_timerfd_create, clockid, flags);
            if (fd >= 0 && fd < 65536) clock_of[fd] = clockid + 1;
            return fd;
        }

        static int is_wall(int clockid) {
            return clockid == CLOCK_REALTIME || clockid == CLOCK_REALTIME_COARSE || clockid == CLOCK_REALTIME_ALARM;
        }

        int timerfd_settime(int fd, int flags, const struct itimerspec *value, struct itimerspec *old) {
            int clockid = (fd >= 0 && fd < 65536) ? clock_of[fd] - 1 : -1;
            if (clockid < 0 || is_wall(clockid)) {
                int (*next)(int, int, const struct itimerspec *, struct itimerspec *) =
                    (int (*)(int, int, const struct itimerspec *, struct itimerspec *))dlsym(RTLD_NEXT, "timerfd_settime");
                return next(fd, flags, value, old);
            }
            return (int)syscall(SYS_timerfd_settime, fd, flags, value, old);
        }

        int clock_nanosleep(clockid_t clockid, int flags, const struct timespec *request, struct timespec *remain) {
            if (is_wall(clockid)) {
                int (*next)(clockid_t, int, const struct timespec *, struct timespec *) =
                    (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
                return next(clockid, flags, request, remain);
            }
            return syscall(SYS_clock_nanosleep, clockid, flags, request, remain) == 0 ? 0 : errno;
        }

        /* Condition variables made with a monotonic clock (a small open-addressed set of their addresses). */
        #define MONOTONIC_CONDS 4096
        static pthread_cond_t *_Atomic monotonic_conds[MONOTONIC_CONDS];

        static size_t cond_slot(pthread_cond_t *cond) { return ((uintptr_t)cond >> 4) % MONOTONIC_CONDS; }

        static int is_monotonic_cond(pthread_cond_t *cond) {
            for (size_t i = 0, slot = cond_slot(cond); i < MONOTONIC_CONDS; i++, slot = (slot + 1) % MONOTONIC_CONDS) {
                pthread_cond_t *seen = atomic_load(&monotonic_conds[slot]);
                if (seen == cond) return 1;
                if (seen == NULL) return 0;
            }
            return 0;
        }

        int pthread_cond_init(pthread_cond_t *cond, const pthread_condattr_t *attr) {
            clockid_t clockid = CLOCK_REALTIME;
            if (attr != NULL) pthread_condattr_getclock(attr, &clockid);
            if (!is_wall(clockid) && !is_monotonic_cond(cond)) {
                for (size_t i = 0, slot = cond_slot(cond); i < MONOTONIC_CONDS; i++, slot = (slot + 1) % MONOTONIC_CONDS) {
                    pthread_cond_t *expected = NULL;
                    if (atomic_compare_exchange_strong(&monotonic_conds[slot], &expected, cond)) break;
                }
            }
            int (*next)(pthread_cond_t *, const pthread_condattr_t *) =
                (int (*)(pthread_cond_t *, const pthread_condattr_t *))dlsym(RTLD_NEXT, "pthread_cond_init");
            return next(cond, attr);
        }

        /* A wait until a time of the (stepped) wall clock, as the kernel waits for a real one: in slices of at most
           50 ms of the monotonic clock, the wall clock read again after each, so a step forward ends the wait and a
           step back lengthens it. (libfaketime converts the deadline once, when the wait starts.) */
        int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
            if (is_monotonic_cond(cond)) return pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, deadline);
            for (;;) {
                struct timespec wall, slice;
                clock_gettime(CLOCK_REALTIME, &wall);
                long long left = (long long)(deadline->tv_sec - wall.tv_sec) * 1000000000LL
                    + (deadline->tv_nsec - wall.tv_nsec);
                if (left <= 0) return ETIMEDOUT;
                if (left > 50000000LL) left = 50000000LL;
                clock_gettime(CLOCK_MONOTONIC, &slice);
                slice.tv_nsec += left;
                slice.tv_sec += slice.tv_nsec / 1000000000L;
                slice.tv_nsec %= 1000000000L;
                int result = pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &slice);
                if (result != ETIMEDOUT) return result;
            }
        }

        /* C11's (librdkafka's): glibc's cnd_t and mtx_t are its pthread types. */
        int cnd_timedwait(cnd_t *cond, mtx_t *mutex, const struct timespec *deadline) {
            int result = pthread_cond_timedwait((pthread_cond_t *)cond, (pthread_mutex_t *)mutex, deadline);
            return result == 0 ? thrd_success : result == ETIMEDOUT ? thrd_timedout : thrd_error;
        }
        """#
}
