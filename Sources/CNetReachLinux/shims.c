#ifdef __linux__
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include "CNetReachLinux.h"

int cnr_setns_net(int fd) { return setns(fd, CLONE_NEWNET); }
int cnr_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }
int cnr_gettid(void) { return (int)syscall(SYS_gettid); }
int cnr_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
int cnr_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
}
#endif
