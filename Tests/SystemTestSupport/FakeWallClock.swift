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
///   library waits at most 50 ms of the monotonic clock at a time instead, and returns as a spurious wakeup so the
///   caller reads the faked wall clock again.
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
        #include <stdint.h>
        #include <sys/syscall.h>
        #include <sys/timerfd.h>
        #include <threads.h>
        #include <time.h>
        #include <unistd.h>

        /* The clock of each timer descriptor (plus one; 0: not a timer this library saw made). A descriptor closed and
           reused for another timer is recorded again when that one is made. */
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

        /* glibc keeps a condition variable's clock in bit 1 of __wrefs (nptl/pthread_cond_common.c): set for one made
           with CLOCK_MONOTONIC, whose deadlines are monotonic already. */
        static int is_monotonic_cond(const pthread_cond_t *cond) { return (cond->__data.__wrefs & 2) != 0; }

        /* A wait until a time of the (stepped) wall clock, as the kernel waits for a real one: for at most 50 ms of the
           monotonic clock, after which it returns as a spurious wakeup (POSIX allows one; every caller waits in a loop
           on its condition and calls again), so the wall clock is read again — a step forward ends the wait, a step
           back lengthens it — and a signal is never held back. (libfaketime converts the deadline once, when the wait
           starts; C11's wait it does not convert at all.) */
        int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
            if (deadline->tv_nsec < 0 || deadline->tv_nsec >= 1000000000L) return EINVAL;
            if (is_monotonic_cond(cond)) return pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, deadline);
            struct timespec wall, slice;
            clock_gettime(CLOCK_REALTIME, &wall);
            long long seconds = (long long)deadline->tv_sec - (long long)wall.tv_sec;
            long long left = seconds > 1 ? 1000000000LL : seconds * 1000000000LL + (deadline->tv_nsec - wall.tv_nsec);
            if (left <= 0) return ETIMEDOUT;
            if (left > 50000000LL) left = 50000000LL;
            clock_gettime(CLOCK_MONOTONIC, &slice);
            slice.tv_nsec += left;
            slice.tv_sec += slice.tv_nsec / 1000000000L;
            slice.tv_nsec %= 1000000000L;
            int result = pthread_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &slice);
            if (result != ETIMEDOUT) return result;
            clock_gettime(CLOCK_REALTIME, &wall);
            int past = wall.tv_sec > deadline->tv_sec || (wall.tv_sec == deadline->tv_sec && wall.tv_nsec >= deadline->tv_nsec);
            return past ? ETIMEDOUT : 0;
        }

        /* C11's (librdkafka's): glibc's cnd_t and mtx_t are its pthread types. */
        int cnd_timedwait(cnd_t *cond, mtx_t *mutex, const struct timespec *deadline) {
            int result = pthread_cond_timedwait((pthread_cond_t *)cond, (pthread_mutex_t *)mutex, deadline);
            return result == 0 ? thrd_success : result == ETIMEDOUT ? thrd_timedout : thrd_error;
        }
        """#
}
