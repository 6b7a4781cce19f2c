/* onnxc_threads.h: how many threads a run takes (adaptive, per input shape).
 *
 * Each parallel loop is an OpenMP fork/join: the caller waits at the join for every team thread.
 * On a quiet machine that costs about a microsecond; while other processes keep the cores busy a
 * team thread that is not running costs the caller a scheduler time slice (milliseconds) at every
 * join: measured here, BERT at 2 threads went from 2.5 ms to 1.1 s per run. And some shapes gain
 * nothing from a second thread (a batch-1 recurrent step is shorter than a wake-up).
 *
 * So a run with num_threads > 1 times itself, and the shape's state keeps two running estimates:
 * the run at num_threads and at one thread (one run in ONNXC_TUNE_PROBE is spent at one thread to
 * keep that estimate fresh). When 4 of the last 8 full runs were slower than ONNXC_TUNE_SLOWER x the
 * one-thread estimate (their median is: a busy machine makes some runs slow, not all), runs take one
 * thread and probe the full count again after 16 runs, doubling up to ONNXC_TUNE_MAX_BACKOFF while the
 * probes stay slow, but never later than when the one-thread runs since the last probe took
 * ONNXC_TUNE_WAIT_RATIO x what that probe cost (probes then take at most ~3% of a busy machine's time,
 * and a burst of load no longer leaves a model on one thread for 4096 runs: MLP at batch 32 spent
 * whole seconds of a benchmark at its one-thread speed after a few busy blocks). A probe is two full
 * runs judged by the second: the first wakes a team that slept through the one-thread runs and is
 * slower than the team's usual run. ONNXC_TUNE_SLOWER is 2: at
 * 1.1 ordinary noise (a run that starts while another runtime's workers still spin) switched shapes
 * that gain 1.7x from the team (mlp batch 32 at 2 threads: 192 us instead of 115). And when 6 of the
 * last 8 full runs were slower than the one-thread estimate itself, the team does not pay whatever
 * the cause (a worker that sleeps between regions: libgomp sometimes leaves one waking by futex at
 * every region, 1.05-1.7x the one-thread time; a shape too small to split): one thread, probing the
 * same way. A shape that gains 1.7x from its team needs 6 of 8 runs 1.7x slower to switch, which is a
 * busy machine. Kernels compute each output element the same
 * way whatever the team, so results do not change (except the last bit of the two loss ops whose
 * double sums are OpenMP reductions).
 *
 * Off with -DONNXC_NO_ADAPTIVE_THREADS, and without OpenMP (no clock is needed then). State is per
 * library and per input-dims hash (ONNXC_TUNE_SLOTS); a run that finds the state in use by another
 * thread takes num_threads and records nothing.
 */
#ifndef ONNXC_THREADS_H
#define ONNXC_THREADS_H

#include <stdint.h>

#if defined(_OPENMP) && !defined(ONNXC_NO_ADAPTIVE_THREADS)
#define ONNXC_ADAPTIVE_THREADS 1
#include <omp.h>

#define ONNXC_TUNE_SLOTS 8
#define ONNXC_TUNE_PROBE 128
#define ONNXC_TUNE_WINDOW_SLOW 4   /* of the last 8 full runs: slower ones that switch to one thread */
#define ONNXC_TUNE_SLOWER 2.0   /* only what a busy machine does to a team: noise must not switch */
/* of the last 8 full runs: how many no faster than one thread switch (a team that does not pay) */
#define ONNXC_TUNE_WINDOW_NO_GAIN 6
#define ONNXC_TUNE_MAX_BACKOFF 4096
#define ONNXC_TUNE_WAIT_RATIO 32.0   /* one-thread time before the next probe, in probe costs */

typedef struct {
    int64_t key;        /* dims hash this slot holds; 0: empty */
    int64_t runs;
    double t_full;      /* running estimates, seconds; 0: none yet */
    double t_one;
    int64_t countdown;  /* one-thread mode: runs left before the next full probe */
    int64_t backoff;
    int64_t full_since; /* the run full mode last resumed at */
    double wait_cost;   /* one-thread mode: what the last probe (or the switch) cost, seconds */
    double waited;      /* one-thread mode: time of the one-thread runs since then */
    double probe_dt;    /* the time of a probe's first run */
    unsigned slow;      /* bit i: full run i runs ago slower than ONNXC_TUNE_SLOWER x t_one */
    unsigned no_gain;   /* bit i: full run i runs ago slower than t_one */
    int one;            /* 1: runs take one thread */
    int warm;           /* one-thread mode: the first of a probe's two full runs is done */
    int busy;           /* held by a run (atomic) */
} onnxc_tune;

static inline int64_t onnxc_tune_key(const int64_t *dims, int n)
{
    uint64_t h = 1469598103934665603u;
    for (int i = 0; i < n; ++i)
        h = (h ^ (uint64_t)dims[i]) * 1099511628211u;
    return (int64_t)(h | 1u);   /* never 0 */
}

/* the slot for `key`, held (NULL: another run holds it: take num_threads, record nothing) */
static inline onnxc_tune *onnxc_tune_acquire(onnxc_tune *slots, int64_t key)
{
    onnxc_tune *s = &slots[(uint64_t)key % ONNXC_TUNE_SLOTS];
    if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
        return (onnxc_tune *)0;
    if (s->key != key) {   /* a new shape takes the slot over */
        s->key = key;
        s->runs = 0;
        s->t_full = s->t_one = 0;
        s->countdown = 0;
        s->backoff = 16;
        s->full_since = 0;
        s->wait_cost = s->waited = s->probe_dt = 0;
        s->slow = s->no_gain = s->one = s->warm = 0;
    }
    return s;
}

/* the count this run takes; *timed = 0: record nothing (a run of a few microseconds is timed one
 * time in 8: the two clock reads cost ~50 ns, 10% of the smallest models) */
static inline int onnxc_tune_threads(onnxc_tune *s, int nt, int *timed)
{
    s->runs++;
    *timed = 1;
    if (!s->one) {
        if (s->runs == 4 || s->runs % ONNXC_TUNE_PROBE == 0)
            return 1;
        *timed = !(s->runs > 16 && s->t_full < 1e-5 && s->runs % 8 != 0);
        return nt;
    }
    return --s->countdown <= 0 || s->waited >= ONNXC_TUNE_WAIT_RATIO * s->wait_cost ? nt : 1;
}

/* one-thread mode from now on: the next probe after `backoff` runs or once the one-thread runs
 * took ONNXC_TUNE_WAIT_RATIO x `cost` */
static inline void onnxc__tune_wait(onnxc_tune *s, double cost)
{
    s->countdown = s->backoff;
    s->wait_cost = cost;
    s->waited = 0;
}

static inline void onnxc_tune_record(onnxc_tune *s, int nt, int used, double dt)
{
    if (used == 1 && nt > 1) {
        s->t_one = s->t_one > 0 ? 0.75 * s->t_one + 0.25 * dt : dt;
        if (s->one)
            s->waited += dt;
    } else if (s->one && !s->warm) {   /* a probe's first run wakes the team: not judged */
        s->warm = 1;
        s->countdown = 1;
        s->probe_dt = dt;
    } else if (s->one) {            /* a probe's second run at the full count */
        s->warm = 0;
        if (dt < s->t_one) {
            s->one = 0;       /* the backoff resets when the full count holds a while */
            s->slow = s->no_gain = 0;
            s->full_since = s->runs;
            s->t_full = dt;
        } else {
            s->backoff = s->backoff * 2 > ONNXC_TUNE_MAX_BACKOFF ? ONNXC_TUNE_MAX_BACKOFF : s->backoff * 2;
            onnxc__tune_wait(s, s->probe_dt + dt);
        }
    } else {
        s->t_full = s->t_full > 0 ? 0.75 * s->t_full + 0.25 * dt : dt;
        s->slow = ((s->slow << 1) | (s->t_one > 0 && dt > ONNXC_TUNE_SLOWER * s->t_one)) & 0xffu;
        s->no_gain = ((s->no_gain << 1) | (s->t_one > 0 && dt > s->t_one)) & 0xffu;
        if (__builtin_popcount(s->slow) >= ONNXC_TUNE_WINDOW_SLOW          /* the median is slower */
            || __builtin_popcount(s->no_gain) >= ONNXC_TUNE_WINDOW_NO_GAIN) {   /* most gain nothing */
            s->one = 1;
            s->slow = s->no_gain = 0;
            /* flapping (full again, soon slow again) backs off like a failed probe */
            s->backoff = s->runs - s->full_since >= 256 ? 16
                       : (s->backoff * 2 > ONNXC_TUNE_MAX_BACKOFF ? ONNXC_TUNE_MAX_BACKOFF : s->backoff * 2);
            onnxc__tune_wait(s, 2 * dt);   /* a probe: two runs like this one */
        }
    }
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

/* a run that failed: nothing learnt */
static inline void onnxc_tune_release(onnxc_tune *s) { __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE); }

static inline double onnxc_tune_now(void) { return omp_get_wtime(); }
#endif

#endif
