#ifdef __linux__
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <errno.h>
#include <linux/filter.h>
#include "CNetReachLinux.h"

int cnr_setns_net(int fd) { return setns(fd, CLONE_NEWNET); }
int cnr_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }
int cnr_gettid(void) { return (int)syscall(SYS_gettid); }
int cnr_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
int cnr_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
}
int cnr_open_path(const char *path) { return open(path, O_PATH | O_CLOEXEC); }
int cnr_set_socket_filter(int fd, const void *instructions, unsigned short count) {
    if (count == 0) {
        int unused = 0;
        // ENOENT: there was none, which is what was asked.
        int result = setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof(unused));
        return (result != 0 && errno == ENOENT) ? 0 : result;
    }
    struct sock_fprog program = { .len = count, .filter = (struct sock_filter *)instructions };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof(program));
}
#endif
