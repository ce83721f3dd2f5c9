/* Shared by latency.c and fanout.c (Benchmarks/run-serve.sh compiles them with gcc at run time).
 *
 * - monotonic_ns(): CLOCK_MONOTONIC in ns.
 * - Route changes through our own NETLINK_ROUTE socket opened inside an `ip netns` namespace:
 *   the IPv4 default route via a gateway on a device is deleted or added, no process spawned,
 *   the kernel's ACK read back (so an error is seen at once).
 * - A Server-Sent Events client of `netreach serve` over HTTP/1.1 with chunked transfer encoding,
 *   decoded incrementally (headers, chunk framing, SSE fields), reporting each dispatched event
 *   with its `id:` and the time of the read that completed it.
 * - /proc/PID/status (VmRSS, VmHWM, RssAnon) and /proc/PID/stat CPU time of the server.
 */
#ifndef SERVE_BENCH_COMMON_H
#define SERVE_BENCH_COMMON_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "serve-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static inline int64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array (q in [0, 1]). */
static double pct(const int64_t *sorted, size_t n, double q) {
    if (n == 0) return -1;
    size_t rank = (size_t)(q * (double)n + 0.999999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return (double)sorted[rank - 1];
}

/* Prints "name": {"n":..,"p50":..,"p90":..,"p99":..,"max":..,"mean":..} in µs, sorting values (ns). */
static void json_stats_us(FILE *f, const char *name, int64_t *values, size_t n, int trailing_comma) {
    qsort(values, n, sizeof *values, cmp_i64);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)values[i];
    fprintf(f, "\"%s\": {\"n\": %zu", name, n);
    if (n) {
        fprintf(f, ", \"min\": %.1f, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"max\": %.1f, \"mean\": %.1f",
                (double)values[0] / 1e3, pct(values, n, 0.50) / 1e3, pct(values, n, 0.90) / 1e3,
                pct(values, n, 0.99) / 1e3, (double)values[n - 1] / 1e3, sum / (double)n / 1e3);
    }
    fprintf(f, "}%s\n", trailing_comma ? "," : "");
}

/* ---- the route changes ------------------------------------------------------------------- */

typedef struct {
    int fd;
    int ifindex;
    struct in_addr gateway;
    uint32_t seq;
} route_changer;

/* Opens a NETLINK_ROUTE socket inside /run/netns/NAME (entering it and coming back: a socket stays
 * in the namespace it was made in) and resolves DEV there. */
static route_changer route_changer_open(const char *ns, const char *gateway, const char *dev) {
    route_changer rc = {.fd = -1};
    if (inet_pton(AF_INET, gateway, &rc.gateway) != 1) die("bad gateway %s", gateway);
    char path[512];
    snprintf(path, sizeof path, "/run/netns/%s", ns);
    int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(path, O_RDONLY | O_CLOEXEC);
    if (own < 0 || target < 0) die("open %s: %s", path, strerror(errno));
    if (setns(target, CLONE_NEWNET) != 0) die("setns %s: %s", path, strerror(errno));
    rc.fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (rc.fd < 0) die("netlink socket: %s", strerror(errno));
    rc.ifindex = (int)if_nametoindex(dev);
    if (rc.ifindex == 0) die("no %s in %s", dev, ns);
    if (setns(own, CLONE_NEWNET) != 0) die("setns back: %s", strerror(errno));
    close(own);
    close(target);
    struct sockaddr_nl local = {.nl_family = AF_NETLINK};
    if (bind(rc.fd, (struct sockaddr *)&local, sizeof local) != 0) die("bind netlink: %s", strerror(errno));
    rc.seq = (uint32_t)time(NULL);
    return rc;
}

static void add_attr(struct nlmsghdr *n, size_t cap, int type, const void *data, size_t len) {
    size_t attr_len = RTA_LENGTH(len);
    if (NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(attr_len) > cap) die("netlink message too long");
    struct rtattr *rta = (struct rtattr *)((char *)n + NLMSG_ALIGN(n->nlmsg_len));
    rta->rta_type = (unsigned short)type;
    rta->rta_len = (unsigned short)attr_len;
    memcpy(RTA_DATA(rta), data, len);
    n->nlmsg_len = (uint32_t)(NLMSG_ALIGN(n->nlmsg_len) + RTA_ALIGN(attr_len));
}

/* Builds the request for `ip route add|del default via GATEWAY dev DEV` (main table). */
static size_t route_message(route_changer *rc, int add, char *buf, size_t cap) {
    memset(buf, 0, cap);
    struct nlmsghdr *n = (struct nlmsghdr *)buf;
    n->nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    n->nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE;
    n->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? (NLM_F_CREATE | NLM_F_EXCL) : 0);
    struct rtmsg *r = NLMSG_DATA(n);
    r->rtm_family = AF_INET;
    r->rtm_dst_len = 0;
    r->rtm_table = RT_TABLE_MAIN;
    r->rtm_protocol = add ? RTPROT_BOOT : 0;
    r->rtm_scope = add ? RT_SCOPE_UNIVERSE : RT_SCOPE_NOWHERE;
    r->rtm_type = RTN_UNICAST;
    add_attr(n, cap, RTA_GATEWAY, &rc->gateway, 4);
    add_attr(n, cap, RTA_OIF, &rc->ifindex, sizeof(int));
    return n->nlmsg_len;
}

/* Sends a prepared request; returns the time just before sendto (CLOCK_MONOTONIC). */
static int64_t route_send(route_changer *rc, char *msg, size_t len) {
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    ((struct nlmsghdr *)msg)->nlmsg_seq = ++rc->seq;
    int64_t t0 = monotonic_ns();
    if (sendto(rc->fd, msg, len, 0, (struct sockaddr *)&kernel, sizeof kernel) != (ssize_t)len)
        die("netlink sendto: %s", strerror(errno));
    return t0;
}

/* Reads the ACK of the last request: 0, or the kernel's negative errno. The ACK is queued during
 * sendto (rtnetlink handles the request synchronously), so this does not wait. */
static int route_ack(route_changer *rc) {
    char buf[8192];
    for (;;) {
        ssize_t got = recv(rc->fd, buf, sizeof buf, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            die("netlink recv: %s", strerror(errno));
        }
        for (struct nlmsghdr *n = (struct nlmsghdr *)buf; NLMSG_OK(n, (unsigned)got); n = NLMSG_NEXT(n, got)) {
            if (n->nlmsg_seq != rc->seq) continue;
            if (n->nlmsg_type == NLMSG_ERROR) return ((struct nlmsgerr *)NLMSG_DATA(n))->error;
        }
    }
}

/* ---- the server's memory and CPU ----------------------------------------------------------- */

typedef struct {
    long rss_kb, hwm_kb, anon_kb, file_kb;
    double cpu_s;
} proc_sample;

static inline proc_sample proc_read(int pid) {
    proc_sample s = {-1, -1, -1, -1, -1};
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            long v;
            if (sscanf(line, "VmRSS: %ld", &v) == 1) s.rss_kb = v;
            else if (sscanf(line, "VmHWM: %ld", &v) == 1) s.hwm_kb = v;
            else if (sscanf(line, "RssAnon: %ld", &v) == 1) s.anon_kb = v;
            else if (sscanf(line, "RssFile: %ld", &v) == 1) s.file_kb = v;
        }
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (f) {
        char stat[4096];
        size_t got = fread(stat, 1, sizeof stat - 1, f);
        stat[got] = 0;
        fclose(f);
        char *p = strrchr(stat, ')');
        unsigned long utime = 0, stime = 0;
        /* after ") ": state(3) ... utime is field 14, stime 15 */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2)
            s.cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
    }
    return s;
}

static inline void json_proc(FILE *f, const char *name, proc_sample s, int trailing_comma) {
    fprintf(f, "\"%s\": {\"rssKB\": %ld, \"hwmKB\": %ld, \"anonKB\": %ld, \"fileKB\": %ld, \"cpuSeconds\": %.2f}%s\n",
            name, s.rss_kb, s.hwm_kb, s.anon_kb, s.file_kb, s.cpu_s, trailing_comma ? "," : "");
}

/* ---- a Server-Sent Events client ------------------------------------------------------------ */

enum { SSE_HEADERS, SSE_BODY, SSE_CLOSED };
enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_DONE };

typedef struct sse_client sse_client;
/* Called once per dispatched event that had `event: path` or `event: namespace` and an `id:`. */
typedef void (*sse_event_fn)(sse_client *c, uint64_t id, int is_path, int64_t when, void *ctx);

struct sse_client {
    int fd;
    int index;
    int phase;
    int chunked;
    char head[8192];
    size_t head_len;
    int chunk_state;
    uint64_t chunk_left;
    char size_line[64];
    size_t size_len;
    int size_ext; /* past a ';' (chunk extension) */
    /* The current line: the first bytes only (enough to tell id/event/data apart). */
    char line[96];
    size_t line_len;
    int line_has_bytes;
    /* The event being read. */
    uint64_t id;
    int has_id, has_data, kind; /* kind: 0 none, 1 path, 2 namespace, 3 shutdown, 4 other */
    uint64_t bytes;
    long events, comments;
    int http_status;
};

static int sse_connect(const char *host, int port, int rcvbuf) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) die("bad host %s", host);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect %s:%d: %s", host, port, strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    static const char request[] =
        "GET /api/v1/events HTTP/1.1\r\nHost: serve-bench\r\nAccept: text/event-stream\r\n\r\n";
    if (send(fd, request, sizeof request - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof request - 1))
        die("send request: %s", strerror(errno));
    return fd;
}

static void sse_line_done(sse_client *c, int64_t when, sse_event_fn fn, void *ctx) {
    size_t n = c->line_len;
    if (n && c->line[n - 1] == '\r') n--;
    c->line[n < sizeof c->line ? n : sizeof c->line - 1] = 0;
    if (!c->line_has_bytes || n == 0) {
        /* A blank line dispatches the event (when it had data). */
        if (c->has_data) {
            c->events++;
            if (c->has_id && (c->kind == 1 || c->kind == 2)) fn(c, c->id, c->kind == 1, when, ctx);
        }
        c->has_id = c->has_data = 0;
        c->kind = 0;
    } else if (c->line[0] == ':') {
        c->comments++;
    } else if (strncmp(c->line, "id:", 3) == 0) {
        c->id = strtoull(c->line + 3, NULL, 10);
        c->has_id = 1;
    } else if (strncmp(c->line, "event:", 6) == 0) {
        const char *v = c->line + 6;
        while (*v == ' ') v++;
        c->kind = strcmp(v, "path") == 0 ? 1 : strcmp(v, "namespace") == 0 ? 2 : strcmp(v, "shutdown") == 0 ? 3 : 4;
    } else if (strncmp(c->line, "data:", 5) == 0) {
        c->has_data = 1;
    }
    c->line_len = 0;
    c->line_has_bytes = 0;
}

/* Event-stream bytes (after de-chunking). */
static void sse_feed_stream(sse_client *c, const char *p, size_t n, int64_t when, sse_event_fn fn, void *ctx) {
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        if (take) {
            size_t room = sizeof c->line - 1 - c->line_len;
            size_t copy = take < room ? take : room;
            memcpy(c->line + c->line_len, p, copy);
            c->line_len += copy;
            c->line_has_bytes = 1;
        }
        if (!nl) return;
        sse_line_done(c, when, fn, ctx);
        p = nl + 1;
        n -= take + 1;
    }
}

/* Body bytes: chunked transfer decoding, or straight through. */
static void sse_feed_body(sse_client *c, const char *p, size_t n, int64_t when, sse_event_fn fn, void *ctx) {
    if (!c->chunked) {
        sse_feed_stream(c, p, n, when, fn, ctx);
        return;
    }
    while (n) {
        switch (c->chunk_state) {
        case CH_SIZE: {
            char ch = *p++;
            n--;
            if (ch == '\n') {
                c->size_line[c->size_len] = 0;
                c->chunk_left = strtoull(c->size_line, NULL, 16);
                c->size_len = 0;
                c->size_ext = 0;
                c->chunk_state = c->chunk_left ? CH_DATA : CH_DONE;
            } else if (ch == ';') {
                c->size_ext = 1;
            } else if (!c->size_ext && c->size_len < sizeof c->size_line - 1 && isxdigit((unsigned char)ch)) {
                c->size_line[c->size_len++] = ch;
            }
            break;
        }
        case CH_DATA: {
            size_t take = n < c->chunk_left ? n : (size_t)c->chunk_left;
            sse_feed_stream(c, p, take, when, fn, ctx);
            p += take;
            n -= take;
            c->chunk_left -= take;
            if (!c->chunk_left) c->chunk_state = CH_DATA_END;
            break;
        }
        case CH_DATA_END:
            if (*p == '\n') c->chunk_state = CH_SIZE;
            p++;
            n--;
            break;
        case CH_DONE:
            return;
        }
    }
}

/* All bytes read from the socket. */
static void sse_feed(sse_client *c, const char *p, size_t n, int64_t when, sse_event_fn fn, void *ctx) {
    c->bytes += n;
    if (c->phase == SSE_HEADERS) {
        size_t room = sizeof c->head - 1 - c->head_len;
        size_t copy = n < room ? n : room;
        memcpy(c->head + c->head_len, p, copy);
        c->head_len += copy;
        c->head[c->head_len] = 0;
        char *end = strstr(c->head, "\r\n\r\n");
        if (!end) {
            if (c->head_len >= sizeof c->head - 1) die("client %d: response head too long", c->index);
            return;
        }
        size_t head_bytes = (size_t)(end + 4 - c->head);
        *end = 0;
        sscanf(c->head, "HTTP/1.%*d %d", &c->http_status);
        if (c->http_status != 200) die("client %d: HTTP status %d: %s", c->index, c->http_status, c->head);
        for (char *q = c->head; *q; q++) *q = (char)tolower((unsigned char)*q);
        c->chunked = strstr(c->head, "transfer-encoding: chunked") != NULL;
        c->phase = SSE_BODY;
        /* What came after the head in this read. */
        size_t before = c->head_len - copy; /* bytes of head buffer filled before this read */
        size_t used = head_bytes - before;
        if (used < n) sse_feed_body(c, p + used, n - used, when, fn, ctx);
        return;
    }
    if (c->phase == SSE_BODY) sse_feed_body(c, p, n, when, fn, ctx);
}

#endif
