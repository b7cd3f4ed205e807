/* The supervisor process (see supervisor.h). */
#include "supervisor.h"

#include "llm_server.h"
#include "sup_monitor.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WINDOW_RESTARTS 256

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
    stop_sig = sig;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL); /* a signal cuts it short: fine */
}

static void write_pid_file(const char *path, int pid)
{
    if (path == NULL)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%d\n", pid) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "supervisor: cannot write pid file %s: %s\n", path, strerror(errno));
}

static int spawn(llm_worker_fn worker, void *ctx, sigset_t *old_mask)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return (int)pid;
    /* worker: default dispositions (serve installs its own), die with the supervisor */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* like kill -9 of a single-process engine */
    if (getppid() != parent)
        _exit(1);
    fflush(stderr);
    _exit(worker(ctx));
}

static void describe(int status, char *out, size_t cap)
{
    if (WIFSIGNALED(status))
        snprintf(out, cap, "killed by signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
                 WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
}

int llm_supervise(const llm_supervisor_opts *o, llm_worker_fn worker, void *ctx)
{
    char err[256];
    llm_monitor *mon = llm_monitor_new(o, err, sizeof err);
    if (mon == NULL) {
        fprintf(stderr, "error: %s\n", err);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a Redis connection closing under a write */
    sigset_t none;
    sigemptyset(&none);

    double restart_at[MAX_WINDOW_RESTARTS];
    int n_restarts = 0, ever_ready = 0, forwarded = 0, rc = 0;
    llm_monitor_before_fork(mon);
    int pid = spawn(worker, ctx, &none);
    if (pid < 0) {
        fprintf(stderr, "error: fork: %s\n", strerror(errno));
        llm_monitor_free(mon);
        return 1;
    }
    write_pid_file(o->pid_file, pid);
    fprintf(stderr, "supervisor: pid %d, worker pid %d\n", (int)getpid(), pid);
    double next_tick = mono_s() + 1.0;
    for (;;) {
        if (stop_sig != 0 && !forwarded) {
            kill(pid, stop_sig);
            forwarded = 1;
        }
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            char how[128];
            describe(status, how, sizeof how);
            /* a worker killed within one poll interval of its READY still left a
             * READY segment behind: it was ready (not a bad model or option) */
            if (!ever_ready && llm_monitor_poll(mon, pid))
                ever_ready = 1;
            llm_monitor_detach(mon);
            if (forwarded || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                fprintf(stderr, "supervisor: worker %d %s; stopping\n", pid, how);
                rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
                if (WIFSIGNALED(status)) {
                    char e2[256];
                    llm_server_retire(o->shm_name, e2, sizeof e2);
                }
                break;
            }
            /* the dead worker's clients learn at once, not after a heartbeat timeout */
            if (llm_server_retire(o->shm_name, err, sizeof err) != 0)
                fprintf(stderr, "supervisor: retiring the dead segment: %s\n", err);
            if (!ever_ready) {
                llm_monitor_event(mon, "worker_failed", "worker %d %s before it was ready; not restarting", pid,
                                  how);
                rc = 1;
                break;
            }
            double now = mono_s();
            int in_window = 0;
            for (int i = 0; i < n_restarts; i++)
                if (now - restart_at[i] < o->restart_window_s)
                    restart_at[in_window++] = restart_at[i];
            n_restarts = in_window;
            if (n_restarts >= o->max_restarts || n_restarts >= MAX_WINDOW_RESTARTS) {
                llm_monitor_event(mon, "gave_up",
                                  "worker %d %s; %d restarts in the last %d s (limit %d): giving up", pid, how,
                                  n_restarts, o->restart_window_s, o->max_restarts);
                rc = 1;
                break;
            }
            int delay_ms = n_restarts == 0 ? 0 : 100 << (n_restarts - 1 < 5 ? n_restarts - 1 : 5);
            if (delay_ms > 2000)
                delay_ms = 2000;
            restart_at[n_restarts++] = now;
            llm_monitor_count_restart(mon);
            llm_monitor_event(mon, "worker_restart", "worker %d %s; restart %d in the last %d s, after %d ms", pid,
                              how, n_restarts, o->restart_window_s, delay_ms);
            for (int waited = 0; waited < delay_ms && stop_sig == 0; waited += 50)
                sleep_ms(50);
            if (stop_sig != 0) {
                fprintf(stderr, "supervisor: stop requested while restarting; stopping\n");
                rc = 0;
                break;
            }
            llm_monitor_before_fork(mon);
            pid = spawn(worker, ctx, &none);
            if (pid < 0) {
                fprintf(stderr, "error: fork: %s\n", strerror(errno));
                rc = 1;
                break;
            }
            write_pid_file(o->pid_file, pid);
            continue;
        } else if (w < 0 && errno != EINTR) {
            fprintf(stderr, "supervisor: waitpid: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        if (llm_monitor_poll(mon, pid))
            ever_ready = 1;
        double now = mono_s();
        if (now >= next_tick) {
            llm_monitor_tick(mon);
            next_tick = now + 1.0;
        }
        sleep_ms(50);
    }
    if (o->pid_file != NULL)
        unlink(o->pid_file);
    llm_monitor_free(mon);
    return rc;
}
