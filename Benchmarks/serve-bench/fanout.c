/* Fan-out of `netreach serve`'s event stream to many clients, and the server's memory meanwhile
 * (Benchmarks/run-serve.sh, sections 2 and 4).
 *
 *   fanout -H 127.0.0.1 -P PORT -n NS -g GATEWAY -d DEV -S SERVE_PID [-N CLIENTS] [-s STALLED]
 *          [-f FLAPS] [-w WARMUP_FLAPS] [-m CHECKPOINTS] [-t TIMEOUT_MS] [-o PER_ID_CSV]
 *
 * CLIENTS readers (default 200) of GET /api/v1/events, all read by this one epoll loop, and, with
 * -s 1, one more client that connects (4 KiB receive buffer), sends its request and never reads.
 * Once every reader has the current state, FLAPS flaps of the default route in NS (deleted, then
 * added: 2 route changes each) through our own NETLINK_ROUTE socket. Paced: each change waits until
 * every reader has every event the change produces (counted during WARMUP_FLAPS warm-up flaps),
 * bounded by TIMEOUT_MS.
 *
 * Arrival of an event at a reader = CLOCK_MONOTONIC right after the recvmsg that completed it; also
 * the kernel's receive time of that data (SO_TIMESTAMPNS, CLOCK_REALTIME), which our loop cannot
 * delay. Delay of a reader for an event id = its arrival - the earliest arrival of that id at any
 * reader. Checks that every reader got every id after the current state, in order, no gap.
 *
 * VmRSS/VmHWM of SERVE_PID: idle (before any client), with the clients connected, after each
 * number of measured route changes in CHECKPOINTS (default "1000,2000"), and at the end.
 * Whether the server dropped the stalled client: after the flaps it is read until EOF (bounded).
 * Prints one JSON object on stdout.
 */
#include "common.h"

#include <sys/epoll.h>
#include <sys/resource.h>

typedef struct {
    uint64_t id;
    int64_t user_ns;   /* CLOCK_MONOTONIC */
    int64_t kernel_ns; /* CLOCK_REALTIME, -1 when the kernel gave none */
} arrival;

typedef struct {
    sse_client c;
    arrival *a;
    size_t n, cap;
    uint64_t last_id;
    int closed;
} reader;

static reader *readers;
static int nreaders;
static int epfd;
static int64_t current_kernel_ns = -1;
static uint64_t max_id;

static void on_event(sse_client *c, uint64_t id, int is_path, int64_t when, void *ctx) {
    (void)is_path;
    reader *r = ctx;
    (void)c;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 4096;
        r->a = realloc(r->a, r->cap * sizeof *r->a);
        if (!r->a) die("out of memory");
    }
    r->a[r->n++] = (arrival){id, when, current_kernel_ns};
    if (id > r->last_id) r->last_id = id;
    if (id > max_id) max_id = id;
}

static long closed_readers;

static void read_reader(reader *r) {
    char buf[65536];
    char control[CMSG_SPACE(sizeof(struct timespec)) + 64];
    for (;;) {
        struct iovec iov = {buf, sizeof buf};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        ssize_t got = recvmsg(r->c.fd, &msg, 0);
        int64_t when = monotonic_ns();
        if (got < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            if (errno == ECONNRESET) got = 0;
            else die("reader %d: recvmsg: %s", r->c.index, strerror(errno));
        }
        if (got == 0) {
            r->closed = 1;
            closed_readers++;
            epoll_ctl(epfd, EPOLL_CTL_DEL, r->c.fd, NULL);
            return;
        }
        current_kernel_ns = -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(cm), sizeof ts);
                current_kernel_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
            }
        }
        sse_feed(&r->c, buf, (size_t)got, when, on_event, r);
        if ((size_t)got < sizeof buf) return; /* level-triggered: the rest, if any, next round */
    }
}

static void pump(int timeout_ms) {
    struct epoll_event events[256];
    int n = epoll_wait(epfd, events, 256, timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return;
        die("epoll_wait: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) read_reader(&readers[events[i].data.u32]);
}

static void pump_for(int ms) {
    int64_t end = monotonic_ns() + (int64_t)ms * 1000000;
    for (int64_t now; (now = monotonic_ns()) < end;) pump((int)((end - now) / 1000000) + 1);
}

static uint64_t min_last_id(void) {
    uint64_t m = UINT64_MAX;
    for (int i = 0; i < nreaders; i++)
        if (!readers[i].closed && readers[i].last_id < m) m = readers[i].last_id;
    return m;
}

static int all_have(uint64_t id) { return min_last_id() >= id; }

/* Pumps until every open reader has an event with id >= want; 0, or -1 after timeout_ms. */
static int pump_until_all(uint64_t want, int timeout_ms) {
    int64_t end = monotonic_ns() + (int64_t)timeout_ms * 1000000;
    while (!all_have(want)) {
        int64_t now = monotonic_ns();
        if (now >= end) return -1;
        pump((int)((end - now) / 1000000) + 1);
    }
    return 0;
}

static void stalled_event(sse_client *c, uint64_t id, int is_path, int64_t when, void *ctx) {
    (void)c, (void)is_path, (void)when;
    uint64_t *last = ctx;
    if (id > *last) *last = id;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *ns = NULL, *gateway = NULL, *dev = NULL, *csv_path = NULL;
    const char *checkpoints_arg = "1000,2000";
    int port = 0, clients = 200, stalled = 1, flaps = 1000, warmup = 2, timeout_ms = 5000, serve_pid = 0;
    for (int opt; (opt = getopt(argc, argv, "H:P:n:g:d:S:N:s:f:w:m:t:o:")) != -1;) {
        switch (opt) {
        case 'H': host = optarg; break;
        case 'P': port = atoi(optarg); break;
        case 'n': ns = optarg; break;
        case 'g': gateway = optarg; break;
        case 'd': dev = optarg; break;
        case 'S': serve_pid = atoi(optarg); break;
        case 'N': clients = atoi(optarg); break;
        case 's': stalled = atoi(optarg); break;
        case 'f': flaps = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'm': checkpoints_arg = optarg; break;
        case 't': timeout_ms = atoi(optarg); break;
        case 'o': csv_path = optarg; break;
        default: die("usage: fanout -P PORT -n NS -g GATEWAY -d DEV -S SERVE_PID [-N CLIENTS] [-s 0|1] ...");
        }
    }
    if (!port || !ns || !gateway || !dev || !serve_pid || clients < 1 || flaps < 1 || warmup < 1)
        die("usage: fanout -P PORT -n NS -g GATEWAY -d DEV -S SERVE_PID [-N CLIENTS] [-s 0|1] ...");
    long checkpoints[16];
    int ncheckpoints = 0;
    for (char *s = (char *)checkpoints_arg; *s && ncheckpoints < 16;) {
        checkpoints[ncheckpoints++] = strtol(s, &s, 10);
        while (*s == ',') s++;
    }
    struct rlimit nofile;
    getrlimit(RLIMIT_NOFILE, &nofile);
    if (nofile.rlim_cur < (rlim_t)clients + 64) {
        nofile.rlim_cur = nofile.rlim_max < (rlim_t)clients + 64 ? nofile.rlim_max : (rlim_t)clients + 64;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }

    route_changer rc = route_changer_open(ns, gateway, dev);
    char del_msg[256], add_msg[256];
    size_t del_len = route_message(&rc, 0, del_msg, sizeof del_msg);
    size_t add_len = route_message(&rc, 1, add_msg, sizeof add_msg);

    sleep(1);
    proc_sample idle = proc_read(serve_pid);
    if (idle.rss_kb < 0) die("no process %d", serve_pid);

    nreaders = clients;
    readers = calloc((size_t)clients, sizeof *readers);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    int64_t connect_start = monotonic_ns();
    for (int i = 0; i < clients; i++) {
        reader *r = &readers[i];
        r->c.index = i;
        r->c.fd = sse_connect(host, port, 0);
        int one = 1;
        setsockopt(r->c.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
        fcntl(r->c.fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, r->c.fd, &ev) != 0) die("epoll_ctl: %s", strerror(errno));
        pump(0);
    }
    sse_client stalled_client = {.index = -1, .fd = -1};
    if (stalled) stalled_client.fd = sse_connect(host, port, 4096);

    /* The current state at every reader: each has an event, then 1 s of quiet. */
    int64_t deadline = monotonic_ns() + 60LL * 1000000000;
    while (!all_have(1)) {
        if (monotonic_ns() > deadline) die("not every reader had the current state within 60 s");
        pump(100);
    }
    double connect_seconds = (double)(monotonic_ns() - connect_start) / 1e9;
    pump_for(1000);
    uint64_t initial_id = max_id;
    size_t *initial_count = calloc((size_t)clients, sizeof(size_t));
    int initial_equal = 1;
    for (int i = 0; i < clients; i++) {
        initial_count[i] = readers[i].n;
        for (size_t k = 0; k < readers[i].n; k++)
            if (readers[i].a[k].id != initial_id) initial_equal = 0;
        if (initial_count[i] != initial_count[0]) initial_equal = 0;
    }
    proc_sample connected = proc_read(serve_pid);

    /* Warm-up: how many events a deletion and an addition each produce. */
    uint64_t per_change[2] = {0, 0};
    for (int i = 0; i < warmup * 2; i++) {
        int add = i % 2;
        uint64_t base = max_id;
        route_send(&rc, add ? add_msg : del_msg, add ? add_len : del_len);
        int err = route_ack(&rc);
        if (err) die("warm-up route %s: %s", add ? "add" : "del", strerror(-err));
        if (pump_until_all(base + 1, 10000) != 0) die("warm-up change %d: no event at every reader within 10 s", i);
        pump_for(300);
        per_change[add] = max_id - base;
    }
    if (!per_change[0] || !per_change[1]) die("a warm-up change produced no event");
    uint64_t first_measured_id = max_id + 1;

    int changes = flaps * 2;
    int64_t *t0 = calloc((size_t)changes, sizeof(int64_t));
    uint64_t *base_id = calloc((size_t)changes, sizeof(uint64_t));
    proc_sample *at_checkpoint = calloc((size_t)ncheckpoints, sizeof(proc_sample));
    int timeouts = 0;
    int64_t started = monotonic_ns();
    proc_sample cpu_start = proc_read(serve_pid);
    double checkpoint_pause_s = 0;
    for (int i = 0; i < changes; i++) {
        int add = i % 2;
        base_id[i] = max_id;
        t0[i] = route_send(&rc, add ? add_msg : del_msg, add ? add_len : del_len);
        int err = route_ack(&rc);
        if (err) die("change %d: route %s: %s", i, add ? "add" : "del", strerror(-err));
        if (pump_until_all(base_id[i] + per_change[add], timeout_ms) != 0) {
            timeouts++;
            pump_for(500);
        }
        for (int k = 0; k < ncheckpoints; k++) {
            if (checkpoints[k] == i + 1) {
                int64_t p0 = monotonic_ns();
                pump_for(300);
                at_checkpoint[k] = proc_read(serve_pid);
                checkpoint_pause_s += (double)(monotonic_ns() - p0) / 1e9;
            }
        }
        if (closed_readers == nreaders) die("every reader was closed by the server");
    }
    double seconds = (double)(monotonic_ns() - started) / 1e9;
    pump_for(500);
    proc_sample end = proc_read(serve_pid);

    /* The stalled client: what the kernel kept for it, then EOF if the server closed it. */
    int stalled_closed = -1;
    uint64_t stalled_last_id = 0;
    if (stalled) {
        struct timeval tv = {.tv_sec = 3};
        setsockopt(stalled_client.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        int64_t stop = monotonic_ns() + 15LL * 1000000000;
        stalled_closed = 0;
        while (monotonic_ns() < stop) {
            char buf[65536];
            ssize_t got = recv(stalled_client.fd, buf, sizeof buf, 0);
            if (got == 0 || (got < 0 && errno == ECONNRESET)) {
                stalled_closed = 1;
                break;
            }
            if (got < 0) break; /* timed out: still open */
            sse_feed(&stalled_client, buf, (size_t)got, monotonic_ns(), stalled_event, &stalled_last_id);
        }
    }

    /* Per id: the earliest arrival at any reader; each reader's delay behind it. */
    uint64_t last_measured_id = max_id;
    size_t ids = last_measured_id >= first_measured_id ? (size_t)(last_measured_id - first_measured_id + 1) : 0;
    int64_t *earliest = malloc(ids * sizeof(int64_t)), *earliest_k = malloc(ids * sizeof(int64_t));
    int64_t *latest = malloc(ids * sizeof(int64_t)), *latest_k = malloc(ids * sizeof(int64_t));
    int *slowest = malloc(ids * sizeof(int));
    for (size_t k = 0; k < ids; k++) earliest[k] = earliest_k[k] = INT64_MAX, latest[k] = latest_k[k] = INT64_MIN;
    int readers_with_gaps = 0, readers_out_of_order = 0, readers_incomplete = 0;
    long kernel_missing = 0;
    for (int i = 0; i < clients; i++) {
        reader *r = &readers[i];
        uint64_t expect = initial_id + 1; /* the warm-up's ids, then the measured ones */
        int gap = 0, disorder = 0;
        for (size_t k = initial_count[i]; k < r->n; k++) {
            arrival *a = &r->a[k];
            if (a->id != expect) {
                if (a->id > expect) gap = 1;
                else disorder = 1;
            }
            expect = a->id + 1;
            if (a->id < first_measured_id || a->id > last_measured_id) continue;
            size_t x = (size_t)(a->id - first_measured_id);
            if (a->user_ns < earliest[x]) earliest[x] = a->user_ns;
            if (a->user_ns > latest[x]) latest[x] = a->user_ns, slowest[x] = i;
            if (a->kernel_ns < 0) kernel_missing++;
            else {
                if (a->kernel_ns < earliest_k[x]) earliest_k[x] = a->kernel_ns;
                if (a->kernel_ns > latest_k[x]) latest_k[x] = a->kernel_ns;
            }
        }
        if (expect != last_measured_id + 1) readers_incomplete++;
        readers_with_gaps += gap;
        readers_out_of_order += disorder;
    }
    size_t cap = (size_t)clients * ids;
    int64_t *delay = malloc((cap ? cap : 1) * sizeof(int64_t)), *delay_k = malloc((cap ? cap : 1) * sizeof(int64_t));
    size_t nd = 0, ndk = 0;
    for (int i = 0; i < clients; i++) {
        reader *r = &readers[i];
        for (size_t k = initial_count[i]; k < r->n; k++) {
            arrival *a = &r->a[k];
            if (a->id < first_measured_id || a->id > last_measured_id) continue;
            size_t x = (size_t)(a->id - first_measured_id);
            delay[nd++] = a->user_ns - earliest[x];
            if (a->kernel_ns >= 0) delay_k[ndk++] = a->kernel_ns - earliest_k[x];
        }
    }
    /* Per change: trigger -> first reader, trigger -> last reader (of the change's last event). */
    int64_t *to_first = malloc((size_t)changes * sizeof(int64_t)), *to_all = malloc((size_t)changes * sizeof(int64_t));
    size_t nf = 0, na = 0;
    for (int i = 0; i < changes; i++) {
        uint64_t first = base_id[i] + 1, last = (i + 1 < changes ? base_id[i + 1] : last_measured_id);
        if (first < first_measured_id || first > last_measured_id || last < first) continue;
        size_t xf = (size_t)(first - first_measured_id), xl = (size_t)(last - first_measured_id);
        if (earliest[xf] != INT64_MAX) to_first[nf++] = earliest[xf] - t0[i];
        if (latest[xl] != INT64_MIN) to_all[na++] = latest[xl] - t0[i];
    }
    if (csv_path) {
        FILE *csv = fopen(csv_path, "w");
        if (!csv) die("open %s: %s", csv_path, strerror(errno));
        fprintf(csv, "id,earliest_ms,spread_us,kernel_spread_us,slowest_reader\n");
        for (size_t x = 0; x < ids; x++) {
            if (earliest[x] == INT64_MAX) continue;
            fprintf(csv, "%llu,%.3f,%.1f,%.1f,%d\n", (unsigned long long)(first_measured_id + x),
                    (double)(earliest[x] - started) / 1e6, (double)(latest[x] - earliest[x]) / 1e3,
                    earliest_k[x] == INT64_MAX ? -1.0 : (double)(latest_k[x] - earliest_k[x]) / 1e3, slowest[x]);
        }
        fclose(csv);
    }

    printf("{\n\"clients\": %d, \"stalledClient\": %s, \"flaps\": %d, \"changes\": %d, \"warmupFlaps\": %d,\n", clients,
           stalled ? "true" : "false", flaps, changes, warmup);
    printf("\"seconds\": %.2f, \"checkpointPauseSeconds\": %.2f, \"connectSeconds\": %.2f, \"timeouts\": %d,\n", seconds,
           checkpoint_pause_s, connect_seconds, timeouts);
    printf("\"eventsPerChange\": {\"del\": %llu, \"add\": %llu}, \"initialId\": %llu, \"initialCountsEqual\": %s, "
           "\"initialEvents\": %zu,\n",
           (unsigned long long)per_change[0], (unsigned long long)per_change[1], (unsigned long long)initial_id,
           initial_equal ? "true" : "false", clients ? initial_count[0] : 0);
    printf("\"firstMeasuredId\": %llu, \"lastMeasuredId\": %llu, \"ids\": %zu,\n", (unsigned long long)first_measured_id,
           (unsigned long long)last_measured_id, ids);
    printf("\"readersWithGaps\": %d, \"readersOutOfOrder\": %d, \"readersIncomplete\": %d, \"readersClosedByServer\": %ld, "
           "\"everyReaderGotEveryIdInOrder\": %s,\n",
           readers_with_gaps, readers_out_of_order, readers_incomplete, closed_readers,
           (!readers_with_gaps && !readers_out_of_order && !readers_incomplete && !closed_readers && ids) ? "true"
                                                                                                          : "false");
    printf("\"arrivalsWithoutKernelTimestamp\": %ld,\n", kernel_missing);
    if (stalled)
        printf("\"stalledDropped\": %s, \"stalledLastIdReceived\": %llu, \"stalledEventsReceived\": %ld,\n",
               stalled_closed == 1 ? "true" : "false", (unsigned long long)stalled_last_id, stalled_client.events);
    json_stats_us(stdout, "delay", delay, nd, 1);
    json_stats_us(stdout, "delayKernel", delay_k, ndk, 1);
    json_stats_us(stdout, "triggerToFirstReader", to_first, nf, 1);
    json_stats_us(stdout, "triggerToLastReader", to_all, na, 1);
    printf("\"memory\": {\n");
    json_proc(stdout, "idle", idle, 1);
    json_proc(stdout, "connected", connected, 1);
    for (int k = 0; k < ncheckpoints; k++) {
        if (checkpoints[k] < 1 || checkpoints[k] > changes) continue; /* never reached */
        char name[64];
        snprintf(name, sizeof name, "after%ldChanges", checkpoints[k]);
        json_proc(stdout, name, at_checkpoint[k], 1);
    }
    json_proc(stdout, "end", end, 0);
    printf("},\n\"serveCPUSecondsDuringFlaps\": %.2f, \"serveCPUMicrosPerChange\": %.1f\n}\n", end.cpu_s - cpu_start.cpu_s,
           (end.cpu_s - cpu_start.cpu_s) * 1e6 / changes);
    return 0;
}
