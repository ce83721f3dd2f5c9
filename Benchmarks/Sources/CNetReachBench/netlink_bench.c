#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/fib_rules.h>

#include "CNetReachBench.h"

int64_t nrb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int nrb_gettid(void) { return (int)syscall(SYS_gettid); }

int nrb_pin_thread(int tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu >= 0) {
        CPU_SET(cpu, &set);
    } else {
        long count = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < count && i < CPU_SETSIZE; i++) CPU_SET(i, &set);
    }
    return sched_setaffinity(tid, sizeof set, &set) == 0 ? 0 : -errno;
}

// The kernel's per-thread CPU clock id for a tid (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)):
// valid for any thread of the caller's thread group.
int64_t nrb_thread_cpu_ns(int tid) {
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 2 /* CPUCLOCK_SCHED */ | 4 /* PERTHREAD */);
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t nrb_process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// Runs `body` with the calling thread in the namespace `path`, then returns home.
static int in_netns(const char *path, int (*body)(void *), void *context) {
    int target = open(path, O_RDONLY | O_CLOEXEC);
    if (target < 0) return -errno;
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) { int e = errno; close(target); return -e; }
    if (setns(target, CLONE_NEWNET) != 0) { int e = errno; close(target); close(home); return -e; }
    int result = body(context);
    int back = setns(home, CLONE_NEWNET);
    close(target);
    close(home);
    if (back != 0) abort(); // never leave a thread of the harness in the benchmark's namespace
    return result;
}

struct socket_request { unsigned groups; int rcvbuf; };

static int open_socket_here(void *context) {
    struct socket_request *request = context;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    if (request->rcvbuf > 0) {
        int size = request->rcvbuf;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    struct sockaddr_nl address = { .nl_family = AF_NETLINK, .nl_groups = request->groups };
    if (bind(fd, (struct sockaddr *)&address, sizeof address) != 0) { int e = errno; close(fd); return -e; }
    return fd;
}

int nrb_open_route_socket_in(const char *netns_path, unsigned groups, int rcvbuf) {
    struct socket_request request = { groups, rcvbuf };
    return in_netns(netns_path, open_socket_here, &request);
}

struct index_request { const char *name; };

static int index_here(void *context) {
    struct index_request *request = context;
    unsigned index = if_nametoindex(request->name);
    if (index == 0) return errno == ENODEV ? 0 : -errno;
    return (int)index;
}

int nrb_ifindex_in(const char *netns_path, const char *ifname) {
    struct index_request request = { ifname };
    return in_netns(netns_path, index_here, &request);
}

static int send_all(int fd, void *message, size_t length) {
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    for (;;) {
        ssize_t sent = sendto(fd, message, length, 0, (struct sockaddr *)&kernel, sizeof kernel);
        if (sent == (ssize_t)length) return 0;
        if (sent < 0 && errno == EINTR) continue;
        return sent < 0 ? -errno : -EIO;
    }
}

static void add_attribute(struct nlmsghdr *header, unsigned short type, const void *data, unsigned short size) {
    struct rtattr *attribute = (struct rtattr *)((char *)header + NLMSG_ALIGN(header->nlmsg_len));
    attribute->rta_type = type;
    attribute->rta_len = RTA_LENGTH(size);
    memcpy(RTA_DATA(attribute), data, size);
    header->nlmsg_len = NLMSG_ALIGN(header->nlmsg_len) + RTA_ALIGN(attribute->rta_len);
}

int nrb_send_route(int fd, int add, int ifindex, uint32_t gateway_be, uint32_t metric, int protocol, uint32_t seq) {
    struct {
        struct nlmsghdr header;
        struct rtmsg route;
        char attributes[64];
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    request.header.nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE;
    request.header.nlmsg_flags = NLM_F_REQUEST | (add ? NLM_F_CREATE | NLM_F_EXCL : 0);
    request.header.nlmsg_seq = seq;
    request.route.rtm_family = AF_INET;
    request.route.rtm_dst_len = 0;
    request.route.rtm_table = RT_TABLE_MAIN;
    request.route.rtm_protocol = add ? (unsigned char)protocol : 0; // 0: delete whatever protocol added it
    request.route.rtm_scope = add ? RT_SCOPE_UNIVERSE : RT_SCOPE_NOWHERE;
    request.route.rtm_type = RTN_UNICAST;
    add_attribute(&request.header, RTA_GATEWAY, &gateway_be, sizeof gateway_be);
    uint32_t oif = (uint32_t)ifindex;
    add_attribute(&request.header, RTA_OIF, &oif, sizeof oif);
    if (metric) add_attribute(&request.header, RTA_PRIORITY, &metric, sizeof metric);
    return send_all(fd, &request, request.header.nlmsg_len);
}

int nrb_send_rule(int fd, int add, uint32_t priority, uint32_t table, uint32_t seq) {
    struct {
        struct nlmsghdr header;
        struct fib_rule_hdr rule;
        char attributes[32];
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct fib_rule_hdr));
    request.header.nlmsg_type = add ? RTM_NEWRULE : RTM_DELRULE;
    request.header.nlmsg_flags = NLM_F_REQUEST | (add ? NLM_F_CREATE | NLM_F_EXCL : 0);
    request.header.nlmsg_seq = seq;
    request.rule.family = AF_INET;
    request.rule.action = FR_ACT_TO_TBL;
    add_attribute(&request.header, FRA_PRIORITY, &priority, sizeof priority);
    add_attribute(&request.header, FRA_TABLE, &table, sizeof table);
    return send_all(fd, &request, request.header.nlmsg_len);
}

int nrb_send_link(int fd, int ifindex, int up, uint32_t seq) {
    struct {
        struct nlmsghdr header;
        struct ifinfomsg link;
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
    request.header.nlmsg_type = RTM_NEWLINK;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.header.nlmsg_seq = seq;
    request.link.ifi_family = AF_UNSPEC;
    request.link.ifi_index = ifindex;
    request.link.ifi_flags = up ? IFF_UP : 0;
    request.link.ifi_change = IFF_UP;
    return send_all(fd, &request, request.header.nlmsg_len);
}

int nrb_drain_errors(int fd, int *first_error) {
    static _Thread_local char buffer[1 << 16];
    int failures = 0;
    for (;;) {
        ssize_t count = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (count < 0) {
            if (errno == EINTR) continue;
            if (errno == ENOBUFS) { if (failures++ == 0 && first_error) *first_error = ENOBUFS; continue; }
            return failures;
        }
        int remaining = (int)count;
        for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, remaining);
             header = NLMSG_NEXT(header, remaining)) {
            if (header->nlmsg_type != NLMSG_ERROR) continue;
            struct nlmsgerr *error = NLMSG_DATA(header);
            if (error->error != 0) {
                if (failures++ == 0 && first_error) *first_error = -error->error;
            }
        }
    }
}

// ---- The floor ---------------------------------------------------------------------------------

static struct {
    int fd;
    int stop_fd;
    pthread_t thread;
    nrb_event *events;
    size_t capacity;
    _Atomic size_t count;
    _Atomic int tid;
    _Atomic uint64_t messages, datagrams, overruns;
    _Atomic int waiters;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    // Asking (nrb_floor_prepare_asking): the families the batch being read can move, bit 0 IPv4,
    // bit 1 IPv6.
    _Atomic int asking;
    int batch_families;
    _Atomic size_t asked_count;
    _Atomic uint64_t asked_batches, asked_connects;
    int output; // nrb_floor_set_output, or -1
} floor_reader = { .fd = -1, .stop_fd = -1, .output = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static struct {
    int udp[2];      // AF_INET, AF_INET6 (-1: none)
    int requests;    // NETLINK_ROUTE, bound to no group
    uint32_t sequence;
    uint8_t candidates[2][8][16];
    int counts[2];
} asker = { .udp = { -1, -1 }, .requests = -1 };

static int families_of(const struct nlmsghdr *header) {
    switch (header->nlmsg_type) {
    case RTM_NEWROUTE: case RTM_DELROUTE: case RTM_NEWRULE: case RTM_DELRULE:
    case RTM_NEWADDR: case RTM_DELADDR: {
        // rtmsg, fib_rule_hdr and ifaddrmsg all start with their family byte.
        if (header->nlmsg_len < NLMSG_LENGTH(1)) return 0;
        unsigned char family = *(const unsigned char *)NLMSG_DATA(header);
        return family == AF_INET ? 1 : family == AF_INET6 ? 2 : 0;
    }
    case RTM_NEWLINK: case RTM_DELLINK: return 3;
    default: return 0;
    }
}

static void floor_record(int64_t ts, const struct nlmsghdr *header) {
    atomic_fetch_add_explicit(&floor_reader.messages, 1, memory_order_relaxed);
    floor_reader.batch_families |= families_of(header);
    size_t index = atomic_load_explicit(&floor_reader.count, memory_order_relaxed);
    if (index >= floor_reader.capacity) return;
    nrb_event event = { .ts = ts, .type = header->nlmsg_type };
    switch (header->nlmsg_type) {
    case RTM_NEWLINK:
    case RTM_DELLINK:
        if (header->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg))) {
            const struct ifinfomsg *link = NLMSG_DATA(header);
            event.ifindex = link->ifi_index;
            event.flags = link->ifi_flags;
        }
        break;
    case RTM_NEWROUTE:
    case RTM_DELROUTE:
        if (header->nlmsg_len >= NLMSG_LENGTH(sizeof(struct rtmsg))) {
            const struct rtmsg *route = NLMSG_DATA(header);
            event.family = route->rtm_family;
            event.dst_len = route->rtm_dst_len;
            event.table = route->rtm_table;
            event.protocol = route->rtm_protocol;
        }
        break;
    }
    floor_reader.events[index] = event;
    atomic_store(&floor_reader.count, index + 1);
}

// ---- Asking: the kernel questions of a batch, in C --------------------------------------------

static void add_request(char *datagram, size_t *used, int family, const uint8_t *destination,
                        const uint8_t *source, int fib_match, uint32_t sequence) {
    int size = family == AF_INET ? 4 : 16;
    struct nlmsghdr *header = (struct nlmsghdr *)(datagram + *used);
    memset(header, 0, NLMSG_SPACE(sizeof(struct rtmsg)));
    header->nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    header->nlmsg_type = RTM_GETROUTE;
    header->nlmsg_flags = NLM_F_REQUEST;
    header->nlmsg_seq = sequence;
    struct rtmsg *route = NLMSG_DATA(header);
    route->rtm_family = (unsigned char)family;
    route->rtm_dst_len = (unsigned char)(size * 8);
    route->rtm_src_len = (unsigned char)(size * 8);
    route->rtm_flags = RTM_F_LOOKUP_TABLE | (fib_match ? RTM_F_FIB_MATCH : 0);
    add_attribute(header, RTA_DST, destination, (unsigned short)size);
    add_attribute(header, RTA_SRC, source, (unsigned short)size);
    *used += NLMSG_ALIGN(header->nlmsg_len);
}

/// Reads the answers to requests `first`...`last`; returns the prefix length of the table entry
/// the last (fibmatch) one names, 0 when it names none (as NetReach counts a missing prefix).
static int await_answers(uint32_t first, uint32_t last) {
    static char buffer[1 << 16];
    int prefix = 0;
    uint32_t seen = 0; // answers read, of last - first + 1
    while (seen < last - first + 1) {
        ssize_t count = recv(asker.requests, buffer, sizeof buffer, 0);
        if (count < 0) { if (errno == EINTR) continue; return 0; }
        int remaining = (int)count;
        for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, remaining);
             header = NLMSG_NEXT(header, remaining)) {
            if (header->nlmsg_seq < first || header->nlmsg_seq > last) continue;
            seen++;
            if (header->nlmsg_seq == last && header->nlmsg_type == RTM_NEWROUTE)
                prefix = ((struct rtmsg *)NLMSG_DATA(header))->rtm_dst_len;
        }
    }
    return prefix;
}

/// Asks what NetReach asks for `family`'s internet (KernelQueries.refresh with no other links).
static void ask_family(int index) {
    int family = index == 0 ? AF_INET : AF_INET6;
    int fd = asker.udp[index];
    for (int i = 0; i < asker.counts[index]; i++) {
        if (fd < 0) return; // no socket of the family: the connect's error stops it
        atomic_fetch_add_explicit(&floor_reader.asked_connects, 1, memory_order_relaxed);
        struct sockaddr unspecified = { .sa_family = AF_UNSPEC };
        connect(fd, &unspecified, sizeof unspecified);
        struct sockaddr_storage address;
        memset(&address, 0, sizeof address);
        socklen_t length;
        if (family == AF_INET) {
            struct sockaddr_in *v4 = (struct sockaddr_in *)&address;
            v4->sin_family = AF_INET;
            v4->sin_port = htons(443);
            memcpy(&v4->sin_addr, asker.candidates[index][i], 4);
            length = sizeof *v4;
        } else {
            struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&address;
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(443);
            memcpy(&v6->sin6_addr, asker.candidates[index][i], 16);
            length = sizeof *v6;
        }
        if (connect(fd, (struct sockaddr *)&address, length) != 0) {
            if (errno == EHOSTUNREACH || errno == EINVAL || errno == EACCES) continue; // refused
            return; // no route: the broadest answer
        }
        struct sockaddr_storage local;
        socklen_t local_length = sizeof local;
        if (getsockname(fd, (struct sockaddr *)&local, &local_length) != 0) return;
        const uint8_t *source = family == AF_INET ? (const uint8_t *)&((struct sockaddr_in *)&local)->sin_addr
                                                  : (const uint8_t *)&((struct sockaddr_in6 *)&local)->sin6_addr;
        char datagram[256];
        size_t used = 0;
        uint32_t first = ++asker.sequence;
        add_request(datagram, &used, family, asker.candidates[index][i], source, 0, first);
        uint32_t last = ++asker.sequence;
        add_request(datagram, &used, family, asker.candidates[index][i], source, 1, last);
        if (send_all(asker.requests, datagram, used) != 0) return;
        if (await_answers(first, last) == 0) return; // a default route answers for the internet
    }
}

/// One line per event of a batch, in one write: what AskingMonitor prints once it has its answers.
static void floor_write(size_t start, size_t end) {
    static char text[1 << 16];
    size_t used = 0;
    for (size_t index = start; index < end && used + 128 < sizeof text; index++) {
        const nrb_event *e = &floor_reader.events[index];
        used += (size_t)snprintf(text + used, sizeof text - used,
                                 "asked type=%u family=%u dst_len=%u table=%u protocol=%u ifindex=%d flags=%u\n",
                                 e->type, e->family, e->dst_len, e->table, e->protocol, e->ifindex, e->flags);
    }
    for (size_t written = 0; written < used;) {
        ssize_t count = write(floor_reader.output, text + written, used - written);
        if (count < 0) { if (errno == EINTR) continue; _exit(errno == EPIPE ? 0 : 1); }
        written += (size_t)count;
    }
}

static void floor_ask(size_t batch_start) {
    int families = floor_reader.batch_families;
    floor_reader.batch_families = 0;
    if (!atomic_load_explicit(&floor_reader.asking, memory_order_relaxed) || families == 0) {
        atomic_store(&floor_reader.asked_count, atomic_load(&floor_reader.count));
        return;
    }
    atomic_fetch_add_explicit(&floor_reader.asked_batches, 1, memory_order_relaxed);
    if (families & 1) ask_family(0);
    if (families & 2) ask_family(1);
    int64_t asked = nrb_now_ns();
    size_t end = atomic_load(&floor_reader.count);
    for (size_t index = batch_start; index < end; index++) floor_reader.events[index].asked_ts = asked;
    atomic_store(&floor_reader.asked_count, end);
    if (floor_reader.output >= 0) floor_write(batch_start, end);
}

struct asking_request { int udp[2]; int requests; };

static int open_asking_here(void *context) {
    struct asking_request *request = context;
    request->udp[0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    request->udp[1] = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct socket_request netlink = { 0, 0 };
    request->requests = open_socket_here(&netlink);
    if (request->requests < 0) return request->requests;
    // The kernel answers inside send; a missing answer ends the wait after a second, not never.
    struct timeval limit = { .tv_sec = 1 };
    setsockopt(request->requests, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    return 0;
}

int nrb_floor_prepare_asking(const char *netns_path, const uint8_t *v4, int count4, const uint8_t *v6, int count6) {
    if (count4 > 8 || count6 > 8 || count4 < 0 || count6 < 0) return -EINVAL;
    struct asking_request request = { { -1, -1 }, -1 };
    int result = in_netns(netns_path, open_asking_here, &request);
    if (result < 0) return result;
    asker.udp[0] = request.udp[0];
    asker.udp[1] = request.udp[1];
    asker.requests = request.requests;
    for (int i = 0; i < count4; i++) memcpy(asker.candidates[0][i], v4 + 4 * i, 4);
    for (int i = 0; i < count6; i++) memcpy(asker.candidates[1][i], v6 + 16 * i, 16);
    asker.counts[0] = count4;
    asker.counts[1] = count6;
    return 0;
}

void nrb_floor_set_output(int fd) { floor_reader.output = fd; }
void nrb_floor_set_asking(int on) { atomic_store(&floor_reader.asking, on && asker.requests >= 0); }
uint64_t nrb_floor_asked_batches(void) { return atomic_load(&floor_reader.asked_batches); }
uint64_t nrb_floor_asked_connects(void) { return atomic_load(&floor_reader.asked_connects); }
size_t nrb_floor_asked_count(void) { return atomic_load_explicit(&floor_reader.asked_count, memory_order_acquire); }

static void *floor_main(void *unused) {
    (void)unused;
    atomic_store(&floor_reader.tid, nrb_gettid());
    pthread_setname_np(pthread_self(), "nrbench.floor");
    static char buffer[1 << 18];
    for (;;) {
        struct pollfd fds[2] = { { floor_reader.fd, POLLIN, 0 }, { floor_reader.stop_fd, POLLIN, 0 } };
        int ready = poll(fds, 2, -1);
        if (ready < 0) { if (errno == EINTR) continue; break; }
        if (fds[1].revents) break;
        size_t batch_start = atomic_load(&floor_reader.count);
        for (;;) {
            ssize_t count = recv(floor_reader.fd, buffer, sizeof buffer, MSG_DONTWAIT);
            if (count < 0) {
                if (errno == EINTR) continue;
                if (errno == ENOBUFS) { atomic_fetch_add(&floor_reader.overruns, 1); continue; }
                // EAGAIN: drained. Like NetReach's engine, ask once per batch, then tell the waiters.
                floor_ask(batch_start);
                if (atomic_load(&floor_reader.waiters) > 0) {
                    pthread_mutex_lock(&floor_reader.lock);
                    pthread_cond_broadcast(&floor_reader.changed);
                    pthread_mutex_unlock(&floor_reader.lock);
                }
                break;
            }
            int64_t ts = nrb_now_ns();
            atomic_fetch_add_explicit(&floor_reader.datagrams, 1, memory_order_relaxed);
            int remaining = (int)count;
            for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, remaining);
                 header = NLMSG_NEXT(header, remaining)) {
                floor_record(ts, header);
            }
            // Wake a waiter only if there is one, so the floor costs nothing extra otherwise.
            if (atomic_load(&floor_reader.waiters) > 0) {
                pthread_mutex_lock(&floor_reader.lock);
                pthread_cond_broadcast(&floor_reader.changed);
                pthread_mutex_unlock(&floor_reader.lock);
            }
        }
    }
    return NULL;
}

int nrb_floor_start(int fd, size_t capacity) {
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&floor_reader.changed, &attributes);
    pthread_condattr_destroy(&attributes);
    floor_reader.fd = fd;
    floor_reader.capacity = capacity;
    floor_reader.events = calloc(capacity, sizeof(nrb_event));
    if (!floor_reader.events) return -ENOMEM;
    floor_reader.stop_fd = eventfd(0, EFD_CLOEXEC);
    if (floor_reader.stop_fd < 0) return -errno;
    int error = pthread_create(&floor_reader.thread, NULL, floor_main, NULL);
    if (error) return -error;
    while (atomic_load(&floor_reader.tid) == 0) sched_yield();
    return 0;
}

void nrb_floor_stop(void) {
    if (floor_reader.stop_fd < 0) return;
    uint64_t one = 1;
    if (write(floor_reader.stop_fd, &one, sizeof one) < 0) abort();
    pthread_join(floor_reader.thread, NULL);
    close(floor_reader.stop_fd);
    floor_reader.stop_fd = -1;
}

size_t nrb_floor_count(void) { return atomic_load_explicit(&floor_reader.count, memory_order_acquire); }

nrb_event nrb_floor_event(size_t index) { return floor_reader.events[index]; }

/// Blocks until `counter()` passes `seen` or `deadline_ns` passes; the floor thread broadcasts
/// after every datagram and every asked batch.
static size_t wait_beyond(size_t (*counter)(void), size_t seen, int64_t deadline_ns) {
    size_t count = counter();
    if (count > seen) return count;
    atomic_fetch_add(&floor_reader.waiters, 1);
    pthread_mutex_lock(&floor_reader.lock);
    struct timespec deadline = { .tv_sec = deadline_ns / 1000000000LL, .tv_nsec = deadline_ns % 1000000000LL };
    for (;;) {
        count = counter();
        if (count > seen || nrb_now_ns() >= deadline_ns) break;
        pthread_cond_timedwait(&floor_reader.changed, &floor_reader.lock, &deadline);
    }
    pthread_mutex_unlock(&floor_reader.lock);
    atomic_fetch_sub(&floor_reader.waiters, 1);
    return count;
}

size_t nrb_floor_wait_beyond(size_t seen, int64_t deadline_ns) {
    return wait_beyond(nrb_floor_count, seen, deadline_ns);
}

size_t nrb_floor_wait_asked_beyond(size_t seen, int64_t deadline_ns) {
    return wait_beyond(nrb_floor_asked_count, seen, deadline_ns);
}

int nrb_floor_tid(void) { return atomic_load(&floor_reader.tid); }
uint64_t nrb_floor_messages(void) { return atomic_load(&floor_reader.messages); }
uint64_t nrb_floor_datagrams(void) { return atomic_load(&floor_reader.datagrams); }
uint64_t nrb_floor_overruns(void) { return atomic_load(&floor_reader.overruns); }

