#ifndef IAP_STOP_SIGNALS_AT_LOAD_H
#define IAP_STOP_SIGNALS_AT_LOAD_H

/// The stop signal (SIGTERM or SIGINT) `iap-worker run` caught between its load and the moment its signal sequence
/// took the signals over, 0 if none. A stop asked for in those first milliseconds is remembered here, then raised
/// again for the sequence, instead of ending the process by the default action.
int iap_stop_signal_caught_at_load(void);

#endif
