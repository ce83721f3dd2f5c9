/* Route change -> event latency: `netreach serve`'s event stream against `ip -o monitor route`, in one
 * process, for the same changes (Benchmarks/run-serve.sh, section 3).
 *
 *   latency -H 127.0.0.1 -P PORT -n NS -g GATEWAY -d DEV [-c CHANGES] [-w WARMUP_FLAPS]
 *           [-t TIMEOUT_MS] [-p PAUSE_MIN_MS] [-q PAUSE_MAX_MS] [-o CSV] [-l IP_LOG] [-W NETREACH]
 *
 * With -W, a third reader: `NETREACH watch --json --namespace NS` through a pipe, read the same way
 * as `ip -o monitor`: serve's event against the same engine's line in the same run, so what serve
 * adds to a change (its event loop, HTTP) is measured apart from what watching costs.
 *
 * One epoll loop reads both the SSE socket (GET /api/v1/events) and the pipe from
 * `ip -n NS -o monitor route`, and notes CLOCK_MONOTONIC right after each read returns. Each change
 * (the default route deleted, then added, alternately) is made through our own NETLINK_ROUTE socket
 * in NS; t0 is taken just before its sendto. Latency of a reader = its first arrival after t0 - t0.
 * The next change waits until both readers have everything the change produces (as counted during
 * the warm-up flaps), bounded by TIMEOUT_MS, then a random pause of PAUSE_MIN..PAUSE_MAX ms.
 * The default route must exist when this starts. Prints one JSON object on stdout.
 */
#include "common.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static int64_t *sse_times;
static uint64_t *sse_ids;
static size_t sse_count, sse_cap;
/* A reader of lines through a pipe (`ip -o monitor`, `netreach watch --json`): when each arrived. */
typedef struct {
    int fd;
    int64_t *times;
    size_t count, cap;
    char partial[8192];
    size_t partial_len;
    FILE *log;
    const char *name;
} line_reader;

static line_reader ip_reader = {.fd = -1, .name = "ip monitor"}, watch_reader = {.fd = -1, .name = "netreach watch"};

static void line_feed(line_reader *r, const char *buf, ssize_t got, int64_t when) {
    for (ssize_t k = 0; k < got; k++) {
        if (r->partial_len < sizeof r->partial - 1) r->partial[r->partial_len++] = buf[k];
        if (buf[k] != '\n') continue;
        if (r->count == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 1024;
            r->times = realloc(r->times, r->cap * sizeof *r->times);
            if (!r->times) die("out of memory");
        }
        r->times[r->count++] = when;
        if (r->log) fwrite(r->partial, 1, r->partial_len, r->log);
        r->partial_len = 0;
    }
}

static void on_event(sse_client *c, uint64_t id, int is_path, int64_t when, void *ctx) {
    (void)c, (void)is_path, (void)ctx;
    if (sse_count == sse_cap) {
        sse_cap = sse_cap ? sse_cap * 2 : 1024;
        sse_times = realloc(sse_times, sse_cap * sizeof *sse_times);
        sse_ids = realloc(sse_ids, sse_cap * sizeof *sse_ids);
        if (!sse_times || !sse_ids) die("out of memory");
    }
    sse_times[sse_count] = when;
    sse_ids[sse_count++] = id;
}

static int epfd;
static sse_client client;

/* One epoll round, waiting at most timeout_ms. */
static void pump(int timeout_ms) {
    struct epoll_event events[4];
    int n = epoll_wait(epfd, events, 4, timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return;
        die("epoll_wait: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        char buf[65536];
        int fd = events[i].data.fd;
        for (;;) {
            ssize_t got = read(fd, buf, sizeof buf);
            int64_t when = monotonic_ns();
            if (got < 0) {
                if (errno == EAGAIN || errno == EINTR) break;
                die("read: %s", strerror(errno));
            }
            line_reader *lines = fd == ip_reader.fd ? &ip_reader : fd == watch_reader.fd ? &watch_reader : NULL;
            if (got == 0) {
                if (lines) die("%s exited", lines->name);
                die("the server closed the event stream");
            }
            if (lines) {
                line_feed(lines, buf, got, when);
            } else {
                sse_feed(&client, buf, (size_t)got, when, on_event, NULL);
            }
        }
    }
}

/* Pumps for ms milliseconds. */
static void pump_for(int ms) {
    int64_t end = monotonic_ns() + (int64_t)ms * 1000000;
    for (int64_t now; (now = monotonic_ns()) < end;) pump((int)((end - now) / 1000000) + 1);
}

/* Pumps until sse_count >= sse_want, ip_reader.count >= ip_want and watch_reader.count >= watch_want; 0 on time,
 * -1 after timeout_ms. */
static int pump_until(size_t sse_want, size_t ip_want, size_t watch_want, int timeout_ms) {
    int64_t end = monotonic_ns() + (int64_t)timeout_ms * 1000000;
    while (sse_count < sse_want || ip_reader.count < ip_want || watch_reader.count < watch_want) {
        int64_t now = monotonic_ns();
        if (now >= end) return -1;
        pump((int)((end - now) / 1000000) + 1);
    }
    return 0;
}

/* Starts argv with its standard output a pipe that `reader` reads (non-blocking); it dies with us. */
static pid_t spawn_reader(line_reader *reader, char *const argv[]) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) die("pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) die("fork: %s", strerror(errno));
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        dup2(pipefd[1], 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    reader->fd = pipefd[0];
    fcntl(reader->fd, F_SETFL, O_NONBLOCK);
    return child;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *ns = NULL, *gateway = NULL, *dev = NULL, *csv_path = NULL, *ip_log_path = NULL,
               *netreach = NULL;
    int port = 0, changes = 400, warmup = 3, timeout_ms = 3000, pause_min = 10, pause_max = 30;
    for (int opt; (opt = getopt(argc, argv, "H:P:n:g:d:c:w:t:p:q:o:l:W:")) != -1;) {
        switch (opt) {
        case 'H': host = optarg; break;
        case 'P': port = atoi(optarg); break;
        case 'n': ns = optarg; break;
        case 'g': gateway = optarg; break;
        case 'd': dev = optarg; break;
        case 'c': changes = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 't': timeout_ms = atoi(optarg); break;
        case 'p': pause_min = atoi(optarg); break;
        case 'q': pause_max = atoi(optarg); break;
        case 'o': csv_path = optarg; break;
        case 'l': ip_log_path = optarg; break;
        case 'W': netreach = optarg; break;
        default: die("usage: latency -P PORT -n NS -g GATEWAY -d DEV [-c CHANGES] ...");
        }
    }
    if (!port || !ns || !gateway || !dev || changes < 2 || warmup < 1 || pause_max < pause_min)
        die("usage: latency -P PORT -n NS -g GATEWAY -d DEV [-c CHANGES] [-w WARMUP_FLAPS] ...");
    rng ^= (uint64_t)getpid() << 20 ^ (uint64_t)monotonic_ns();
    if (ip_log_path && !(ip_reader.log = fopen(ip_log_path, "w"))) die("open %s: %s", ip_log_path, strerror(errno));

    route_changer rc = route_changer_open(ns, gateway, dev);
    char del_msg[256], add_msg[256];
    size_t del_len = route_message(&rc, 0, del_msg, sizeof del_msg);
    size_t add_len = route_message(&rc, 1, add_msg, sizeof add_msg);

    /* ip -n NS -o monitor route (and netreach watch), each one's standard output our pipe; they
     * die with us. */
    pid_t monitor = spawn_reader(&ip_reader, (char *const[]){"ip", "-n", (char *)ns, "-o", "monitor", "route", NULL});
    pid_t watcher = netreach ? spawn_reader(&watch_reader, (char *const[]){(char *)netreach, "watch", "--json",
                                                                            "--namespace", (char *)ns, NULL})
                             : -1;

    client.index = 0;
    client.fd = sse_connect(host, port, 0);
    fcntl(client.fd, F_SETFL, O_NONBLOCK);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.fd = client.fd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, client.fd, &ev);
    ev.data.fd = ip_reader.fd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, ip_reader.fd, &ev);
    if (netreach) {
        ev.data.fd = watch_reader.fd;
        epoll_ctl(epfd, EPOLL_CTL_ADD, watch_reader.fd, &ev);
    }

    /* The current state first: every event of the first read's burst (and watch's first line),
     * then 1 s of quiet. */
    if (pump_until(1, 0, netreach ? 1 : 0, 10000) != 0) die("no event from the server (or no watch line) within 10 s");
    pump_for(1000);
    size_t initial = sse_count;
    if (ip_reader.count) die("ip monitor reported %zu lines before any change", ip_reader.count);

    /* Warm-up: what one deletion and one addition produce for each reader (also proves the monitor
     * is subscribed). */
    size_t sse_per[2] = {0, 0}, ip_per[2] = {0, 0}, watch_per[2] = {0, 0};
    int varied = 0;
    for (int i = 0; i < warmup * 2; i++) {
        int add = i % 2;
        size_t s0 = sse_count, i0 = ip_reader.count, w0 = watch_reader.count;
        route_send(&rc, add ? add_msg : del_msg, add ? add_len : del_len);
        int err = route_ack(&rc);
        if (err) die("warm-up route %s: %s", add ? "add" : "del", strerror(-err));
        if (pump_until(s0 + 1, i0 + 1, netreach ? w0 + 1 : 0, 5000) != 0)
            die("warm-up change %d: serve %zu, ip monitor %zu, watch %zu new (want >= 1 each within 5 s)", i,
                sse_count - s0, ip_reader.count - i0, watch_reader.count - w0);
        pump_for(300);
        size_t s = sse_count - s0, l = ip_reader.count - i0, w = watch_reader.count - w0;
        if (i >= 2 && (s != sse_per[add] || l != ip_per[add] || w != watch_per[add])) varied = 1;
        sse_per[add] = s;
        ip_per[add] = l;
        watch_per[add] = w;
    }

    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv) fprintf(csv, "change,kind,serve_first_us,serve_last_us,ip_us,serve_events,ip_lines,first_id,watch_us\n");
    int64_t *serve_first = calloc((size_t)changes, sizeof(int64_t));
    int64_t *serve_last = calloc((size_t)changes, sizeof(int64_t));
    int64_t *ip_lat = calloc((size_t)changes, sizeof(int64_t));
    int64_t *delta = calloc((size_t)changes, sizeof(int64_t));
    int64_t *watch_lat = calloc((size_t)changes, sizeof(int64_t));
    int64_t *serve_minus_watch = calloc((size_t)changes, sizeof(int64_t));
    size_t n_first = 0, n_last = 0, n_ip = 0, n_delta = 0, n_watch = 0, n_smw = 0;
    int timeouts = 0;
    long extra_events = 0, extra_lines = 0, missing_events = 0;
    int64_t started = monotonic_ns();
    for (int i = 0; i < changes; i++) {
        int add = i % 2;
        size_t s0 = sse_count, i0 = ip_reader.count, w0 = watch_reader.count;
        int64_t t0 = route_send(&rc, add ? add_msg : del_msg, add ? add_len : del_len);
        int err = route_ack(&rc);
        if (err) die("change %d: route %s: %s", i, add ? "add" : "del", strerror(-err));
        int late = pump_until(s0 + sse_per[add], i0 + ip_per[add], w0 + watch_per[add], timeout_ms);
        if (late) timeouts++;
        int64_t sf = sse_count > s0 ? sse_times[s0] - t0 : -1;
        size_t last_index = s0 + sse_per[add] - 1;
        int64_t sl = sse_count > last_index ? sse_times[last_index] - t0 : -1;
        int64_t il = ip_reader.count > i0 ? ip_reader.times[i0] - t0 : -1;
        if (sf >= 0) serve_first[n_first++] = sf;
        if (sl >= 0) serve_last[n_last++] = sl;
        if (il >= 0) ip_lat[n_ip++] = il;
        if (sf >= 0 && il >= 0) delta[n_delta++] = sf - il;
        int64_t wl = watch_reader.count > w0 ? watch_reader.times[w0] - t0 : -1;
        if (wl >= 0) watch_lat[n_watch++] = wl;
        if (sf >= 0 && wl >= 0) serve_minus_watch[n_smw++] = sf - wl;
        /* The pause before the next change; anything more this change produced shows up here. */
        int pause = pause_min + (int)(next_random() % (uint64_t)(pause_max - pause_min + 1));
        pump_for(late ? 500 : pause);
        long got_events = (long)(sse_count - s0), got_lines = (long)(ip_reader.count - i0);
        if (got_events > (long)sse_per[add]) extra_events += got_events - (long)sse_per[add];
        if (got_events < (long)sse_per[add]) missing_events += (long)sse_per[add] - got_events;
        if (got_lines > (long)ip_per[add]) extra_lines += got_lines - (long)ip_per[add];
        if (csv)
            fprintf(csv, "%d,%s,%.1f,%.1f,%.1f,%ld,%ld,%llu,%.1f\n", i, add ? "add" : "del", sf / 1e3, sl / 1e3,
                    il / 1e3, got_events, got_lines, sse_count > s0 ? (unsigned long long)sse_ids[s0] : 0ULL,
                    wl / 1e3);
    }
    double seconds = (double)(monotonic_ns() - started) / 1e9;
    if (csv) fclose(csv);
    /* Leave the default route in place. */
    if (changes % 2) {
        route_send(&rc, add_msg, add_len);
        route_ack(&rc);
    }
    kill(monitor, SIGTERM);
    waitpid(monitor, NULL, 0);
    if (watcher > 0) {
        kill(watcher, SIGTERM);
        waitpid(watcher, NULL, 0);
    }

    printf("{\n\"changes\": %d, \"warmupFlaps\": %d, \"seconds\": %.2f, \"initialEvents\": %zu,\n", changes, warmup,
           seconds, initial);
    printf("\"serveEventsPerChange\": {\"del\": %zu, \"add\": %zu}, \"ipLinesPerChange\": {\"del\": %zu, \"add\": %zu}, "
           "\"perChangeCountsVaried\": %s,\n",
           sse_per[0], sse_per[1], ip_per[0], ip_per[1], varied ? "true" : "false");
    printf("\"timeouts\": %d, \"extraEvents\": %ld, \"missingEvents\": %ld, \"extraIPLines\": %ld,\n", timeouts,
           extra_events, missing_events, extra_lines);
    /* json_stats_us sorts each array in place: the ratios below read the sorted arrays. */
    json_stats_us(stdout, "serve", serve_first, n_first, 1);
    json_stats_us(stdout, "serveLastEventOfChange", serve_last, n_last, 1);
    json_stats_us(stdout, "ipMonitor", ip_lat, n_ip, 1);
    json_stats_us(stdout, "serveMinusIP", delta, n_delta, 1);
    if (netreach) {
        printf("\"watchLinesPerChange\": {\"del\": %zu, \"add\": %zu},\n", watch_per[0], watch_per[1]);
        json_stats_us(stdout, "watch", watch_lat, n_watch, 1);
        json_stats_us(stdout, "serveMinusWatch", serve_minus_watch, n_smw, 1);
    }
    double ratio = (n_first && n_ip) ? pct(serve_first, n_first, 0.5) / pct(ip_lat, n_ip, 0.5) : -1;
    double ratio99 = (n_first && n_ip) ? pct(serve_first, n_first, 0.99) / pct(ip_lat, n_ip, 0.99) : -1;
    printf("\"p50Ratio\": %.3f, \"p99Ratio\": %.3f\n}\n", ratio, ratio99);
    if (ip_reader.log) fclose(ip_reader.log);
    return 0;
}
