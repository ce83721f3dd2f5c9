// Kernel interfaces that `import Glibc` does not bring in: rtnetlink constants and structs,
// ARPHRD_* link types, inotify, eventfd, and setns. Only declarations and static inline shims
// live here. The include order below matters (see the comment at <net/if.h>).
#ifndef CNETREACHLINUX_H
#define CNETREACHLINUX_H

#ifdef __linux__

// <net/if.h> must come before any <linux/...> header that pulls in <linux/if.h>, so the
// kernel's libc-compat guards skip the definitions glibc already made.
#include <net/if.h>
#include <sys/socket.h>
#include <sys/inotify.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>   // statfs: serve --all-namespaces tells namespaces (nsfs) from plain files
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#include <linux/if_addr.h>
#include <linux/if_arp.h>

/// Joins the network namespace referred to by `fd` on the calling thread (setns(2) with
/// CLONE_NEWNET). Returns 0 or -1 with errno set. Defined in shims.c, where _GNU_SOURCE may be set
/// without breaking the Glibc module.
int cnr_setns_net(int fd);

/// Names the calling thread (pthread_setname_np; at most 15 characters are kept).
int cnr_set_thread_name(const char *name);

/// The calling thread's kernel thread id (gettid(2)).
int cnr_gettid(void);

/// A descriptor that becomes readable when process `pid` exits (pidfd_open(2), Linux 5.3+),
/// or -1 with errno set.
int cnr_pidfd_open(int pid);

/// Attaches the classic BPF program of `count` instructions at `instructions` (each laid out as
/// `struct sock_filter`: u16 code, u8 jt, u8 jf, u32 k) to socket `fd` (SO_ATTACH_FILTER, which
/// replaces any earlier one); `count` 0 detaches (SO_DETACH_FILTER). Returns 0 or -1 with errno set.
int cnr_set_socket_filter(int fd, const void *instructions, unsigned short count);

/// Starts writing `length` bytes of `fd` from `offset` back to disk without waiting
/// (sync_file_range(2) with SYNC_FILE_RANGE_WRITE). Returns 0 or -1 with errno set.
int cnr_start_writeback(int fd, long long offset, long long length);

/// open(2) with O_PATH | O_CLOEXEC: a descriptor that names the file `path` leads to, the kernel
/// following links under its own rules, without opening it for reading or writing (a FIFO does
/// not wait for its other end). Returns the descriptor or -1 with errno set. O_PATH needs
/// _GNU_SOURCE, which is set in shims.c only.
int cnr_open_path(const char *path);

/// Bind-mounts every file of /etc/netns/NAME over its /etc namesake, as `ip netns exec NAME`
/// does; the caller is in a mount namespace of its own. No such directory: nothing to do.
/// Returns 0, or -1 with errno set and `step` (at least 256 bytes) naming what failed.
int cnr_bind_netns_etc(const char *name, char *step);

/// Moves the calling thread, for the rest of its life, into the network namespace open as
/// `netns_fd` with the files a process there reads, so that getaddrinfo on it resolves as a
/// program in that namespace would:
/// - `mount_namespace_fd` >= 0 (a container's /proc/PID/ns/mnt): that mount namespace, as
///   `nsenter --net --mount` does;
/// - else `etc_name` non-NULL: a private mount namespace in which every file of
///   /etc/netns/NAME is bind-mounted over its /etc namesake, as `ip netns exec NAME` does;
/// - else only the network namespace.
/// The thread first stops sharing its file-system attributes with the process (CLONE_FS), so
/// nothing of this reaches other threads; the thread must end afterwards, never run other work.
/// Returns 0, or -1 with errno set and `step` (at least 256 bytes) naming what failed.
int cnr_enter_namespace_for_lookup(int netns_fd, int mount_namespace_fd, const char *etc_name, char *step);

static inline unsigned int cnr_nlmsg_align(unsigned int len) { return NLMSG_ALIGN(len); }
static inline unsigned int cnr_rta_align(unsigned int len) { return RTA_ALIGN(len); }
static inline unsigned int cnr_nlmsghdr_size(void) { return (unsigned int)sizeof(struct nlmsghdr); }
static inline unsigned int cnr_ifinfomsg_size(void) { return (unsigned int)sizeof(struct ifinfomsg); }
static inline unsigned int cnr_ifaddrmsg_size(void) { return (unsigned int)sizeof(struct ifaddrmsg); }
static inline unsigned int cnr_rtmsg_size(void) { return (unsigned int)sizeof(struct rtmsg); }
static inline unsigned int cnr_rtgenmsg_size(void) { return (unsigned int)sizeof(struct rtgenmsg); }

#endif // __linux__
#endif // CNETREACHLINUX_H
