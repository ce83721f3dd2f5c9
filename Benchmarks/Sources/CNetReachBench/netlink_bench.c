#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
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
} floor_reader = { .fd = -1, .stop_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static void floor_record(int64_t ts, const struct nlmsghdr *header) {
    atomic_fetch_add_explicit(&floor_reader.messages, 1, memory_order_relaxed);
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
        for (;;) {
            ssize_t count = recv(floor_reader.fd, buffer, sizeof buffer, MSG_DONTWAIT);
            if (count < 0) {
                if (errno == EINTR) continue;
                if (errno == ENOBUFS) { atomic_fetch_add(&floor_reader.overruns, 1); continue; }
                break; // EAGAIN: drained
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

size_t nrb_floor_wait_beyond(size_t seen, int64_t deadline_ns) {
    size_t count = nrb_floor_count();
    if (count > seen) return count;
    atomic_fetch_add(&floor_reader.waiters, 1);
    pthread_mutex_lock(&floor_reader.lock);
    struct timespec deadline = { .tv_sec = deadline_ns / 1000000000LL, .tv_nsec = deadline_ns % 1000000000LL };
    for (;;) {
        count = nrb_floor_count();
        if (count > seen || nrb_now_ns() >= deadline_ns) break;
        pthread_cond_timedwait(&floor_reader.changed, &floor_reader.lock, &deadline);
    }
    pthread_mutex_unlock(&floor_reader.lock);
    atomic_fetch_sub(&floor_reader.waiters, 1);
    return count;
}

int nrb_floor_tid(void) { return atomic_load(&floor_reader.tid); }
uint64_t nrb_floor_messages(void) { return atomic_load(&floor_reader.messages); }
uint64_t nrb_floor_datagrams(void) { return atomic_load(&floor_reader.datagrams); }
uint64_t nrb_floor_overruns(void) { return atomic_load(&floor_reader.overruns); }
