// Raw rtnetlink plumbing for the NetReach benchmark harness: clocks, namespace-bound sockets, the
// change issuer (RTM_NEWROUTE/RTM_DELROUTE/RTM_NEWLINK built by hand, no process spawn), and the
// floor: a minimal reader thread that timestamps each notification as it is received.
// Only plain C types cross this header, so Swift needs no kernel headers and no _GNU_SOURCE.
#ifndef CNETREACHBENCH_H
#define CNETREACHBENCH_H

#include <stddef.h>
#include <stdint.h>

/// CLOCK_MONOTONIC in nanoseconds.
int64_t nrb_now_ns(void);
/// The calling thread's kernel id.
int nrb_gettid(void);
/// CPU time (user + system) in ns of thread `tid` of this process, from its per-thread CPU clock;
/// -1 if it cannot be read.
int64_t nrb_thread_cpu_ns(int tid);
/// CPU time in ns of the whole process (CLOCK_PROCESS_CPUTIME_ID).
int64_t nrb_process_cpu_ns(void);
/// Pins thread `tid` (any process's) to CPU `cpu`, or lets it run on every CPU when `cpu` < 0.
/// Returns 0, or -errno.
int nrb_pin_thread(int tid, int cpu);

// Multicast groups (RTMGRP_*), so Swift does not need <linux/rtnetlink.h>.
#define NRB_GROUPS_NETREACH 0x5D1u  /* LINK | IPV4_IFADDR | IPV4_ROUTE | IPV4_RULE | IPV6_IFADDR | IPV6_ROUTE */

/// Opens a NETLINK_ROUTE socket bound in the namespace `netns_path` (setns on the calling thread,
/// socket, setns back), joined to `groups`, with `rcvbuf` bytes of receive buffer (SO_RCVBUFFORCE).
/// Returns the fd, or -errno.
int nrb_open_route_socket_in(const char *netns_path, unsigned groups, int rcvbuf);
/// if_nametoindex inside a namespace; 0 if absent, -errno on failure.
int nrb_ifindex_in(const char *netns_path, const char *ifname);

/// Sends RTM_NEWROUTE (add != 0, NLM_F_CREATE|NLM_F_EXCL, rtm_protocol `protocol`) or RTM_DELROUTE
/// (any protocol) for the IPv4 default route via `gateway_be` (network byte order) out of
/// `ifindex` with priority `metric` (0: none), main table, without NLM_F_ACK (failures still come
/// back as NLMSG_ERROR; read them with nrb_drain_errors). Returns 0 or -errno of sendmsg.
int nrb_send_route(int fd, int add, int ifindex, uint32_t gateway_be, uint32_t metric, int protocol, uint32_t seq);
/// Sends RTM_NEWRULE (add != 0, NLM_F_CREATE|NLM_F_EXCL) or RTM_DELRULE for the IPv4 rule
/// `priority: from all lookup table`, without NLM_F_ACK. Returns 0 or -errno of sendmsg.
int nrb_send_rule(int fd, int add, uint32_t priority, uint32_t table, uint32_t seq);
/// Sends RTM_NEWLINK setting (up != 0) or clearing IFF_UP on `ifindex`, without NLM_F_ACK.
int nrb_send_link(int fd, int ifindex, int up, uint32_t seq);
/// Reads, without blocking, what the kernel queued on an issuer socket; returns how many
/// NLMSG_ERROR messages carried a failure and stores the first failure's errno in *first_error.
int nrb_drain_errors(int fd, int *first_error);

/// One notification as the floor saw it.
typedef struct {
    int64_t ts;        // CLOCK_MONOTONIC ns, taken right after the recv that returned it
    uint16_t type;     // nlmsg_type
    uint8_t family;    // rtm_family for routes
    uint8_t dst_len;   // rtm_dst_len for routes
    uint8_t protocol;  // rtm_protocol for routes
    uint32_t table;    // rtm_table for routes
    int32_t ifindex;   // ifi_index for links
    uint32_t flags;    // ifi_flags for links
    int64_t asked_ts;  // with asking on: when the kernel had answered the questions this
                       // message asks (nrb_floor_prepare_asking), else 0
} nrb_event;

#define NRB_RTM_NEWLINK 16
#define NRB_RTM_DELLINK 17
#define NRB_RTM_NEWRULE 32
#define NRB_RTM_DELRULE 33
#define NRB_RTM_NEWROUTE 24
#define NRB_RTM_DELROUTE 25
#define NRB_RTPROT_BOOT 3
#define NRB_RTPROT_STATIC 4
#define NRB_IFF_UP 0x1u
#define NRB_IFF_RUNNING 0x40u
#define NRB_IFF_LOWER_UP 0x10000u

/// Starts the floor thread on `fd` (a socket from nrb_open_route_socket_in), keeping up to
/// `capacity` events. One floor per process. Returns 0 or -errno.
int nrb_floor_start(int fd, size_t capacity);
/// Stops and joins the floor thread.
void nrb_floor_stop(void);
/// Events recorded so far (messages beyond capacity are counted in nrb_floor_messages only).
size_t nrb_floor_count(void);
/// Copies event `index` (< nrb_floor_count()).
nrb_event nrb_floor_event(size_t index);
/// Blocks until more than `seen` events are recorded or CLOCK_MONOTONIC passes `deadline_ns`;
/// returns the count.
size_t nrb_floor_wait_beyond(size_t seen, int64_t deadline_ns);
/// The floor thread's kernel id (0 before it started).
int nrb_floor_tid(void);
/// Notification messages and datagrams received, and ENOBUFS overruns seen, since start.
uint64_t nrb_floor_messages(void);
uint64_t nrb_floor_datagrams(void);
uint64_t nrb_floor_overruns(void);

/// Prepares the floor to ask, in C, the kernel questions NetReach's engine asks after a batch (its
/// lower bound): per family a change can move (a route's or rule's own family, both for a link or
/// an address), the candidates `v4`/`v6` (`count4`/`count6` addresses, 4 or 16 bytes each) in
/// order, each as a UDP `connect()` to port 443 after an `AF_UNSPEC` one, `getsockname`, then
/// `RTM_GETROUTE` from that source and the same with `RTM_F_FIB_MATCH` in one datagram, until one
/// is routed by a prefix-0 entry or the connect fails with other than EHOSTUNREACH/EINVAL/EACCES.
/// Sockets are opened in the namespace at `netns_path`. Returns 0 or -errno.
int nrb_floor_prepare_asking(const char *netns_path, const uint8_t *v4, int count4, const uint8_t *v6, int count6);
/// After each asked batch, writes one line per notification of it to `fd` (AskingMonitor).
void nrb_floor_set_output(int fd);
/// Turns asking on or off for the batches the floor reads from now on (prepared first).
void nrb_floor_set_asking(int on);
/// Batches asked about and questions (connects) made since start.
uint64_t nrb_floor_asked_batches(void);
uint64_t nrb_floor_asked_connects(void);
/// Events whose batch has been asked about (or needed no question): asked_ts is final below it.
size_t nrb_floor_asked_count(void);
/// Blocks until more than `seen` events are asked about or `deadline_ns` passes; returns the count.
size_t nrb_floor_wait_asked_beyond(size_t seen, int64_t deadline_ns);

#endif
