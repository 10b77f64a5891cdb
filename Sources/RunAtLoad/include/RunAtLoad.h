#ifndef IAP_RUN_AT_LOAD_H
#define IAP_RUN_AT_LOAD_H

/// The stop signal (SIGTERM or SIGINT) `iap-worker run` caught between its load and the moment its signal sequence
/// took the signals over, 0 if none. A stop asked for in those first milliseconds is remembered here, then raised
/// again for the sequence, instead of ending the process by the default action.
int iap_stop_signal_caught_at_load(void);

/// The number of malloc arenas `iap-worker run` limited glibc's allocator to at load (one per online core, two to
/// four), or 0 when it left the limit alone: another command, an operator's own `MALLOC_ARENA_MAX` (non-empty) or
/// `GLIBC_TUNABLES` arena setting, or a C library without arenas.
int iap_malloc_arena_limit_at_load(void);

/// Gives the allocator's free memory back to the system: every whole free page inside glibc's heaps, not only at
/// their tops (`malloc_trim(0)`). glibc's answer: 1 when it advised any pages away (again, for pages it gave back
/// before), 0 otherwise or when the C library is not glibc. It holds each arena's lock in turn for its walk: a few
/// milliseconds, tens on a heap of thousands of holes, while allocations from that arena wait. Not for a hot path.
int iap_release_free_memory(void);

#endif
