#ifdef __linux__
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <errno.h>
#include <linux/filter.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include "CNetReachLinux.h"

int cnr_setns_net(int fd) { return setns(fd, CLONE_NEWNET); }
int cnr_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }
int cnr_gettid(void) { return (int)syscall(SYS_gettid); }
int cnr_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
int cnr_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
}
int cnr_open_path(const char *path) { return open(path, O_PATH | O_CLOEXEC); }

int cnr_bind_netns_etc(const char *name, char *step) {
    char directory[4096];
    if (snprintf(directory, sizeof directory, "/etc/netns/%s", name) >= (int)sizeof directory) {
        errno = ENAMETOOLONG;
        strcpy(step, "naming /etc/netns/NAME");
        return -1;
    }
    DIR *entries = opendir(directory);
    if (entries == NULL) return 0;   // nothing to bind: the machine's files, as with ip netns exec
    struct dirent *entry;
    while ((entry = readdir(entries)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char source[4400], target[4400];
        snprintf(source, sizeof source, "%s/%s", directory, entry->d_name);
        snprintf(target, sizeof target, "/etc/%s", entry->d_name);
        if (mount(source, target, "none", MS_BIND, NULL) != 0) {
            int code = errno;
            snprintf(step, 256, "bind-mounting %s over %s", source, target);
            closedir(entries);
            errno = code;
            return -1;
        }
    }
    closedir(entries);
    return 0;
}

int cnr_enter_namespace_for_lookup(int netns_fd, int mount_namespace_fd, const char *etc_name, char *step) {
    if (unshare(CLONE_FS) != 0) { strcpy(step, "unsharing the thread's file-system attributes"); return -1; }
    if (mount_namespace_fd >= 0) {
        if (setns(mount_namespace_fd, CLONE_NEWNS) != 0) { strcpy(step, "entering the mount namespace"); return -1; }
    } else if (etc_name != NULL) {
        // A mount namespace of this thread's own, whose changes never reach the machine's.
        if (unshare(CLONE_NEWNS) != 0) { strcpy(step, "unsharing the mount namespace"); return -1; }
        if (mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0) { strcpy(step, "making / a slave mount"); return -1; }
        if (cnr_bind_netns_etc(etc_name, step) != 0) return -1;
    }
    if (setns(netns_fd, CLONE_NEWNET) != 0) { strcpy(step, "entering the network namespace"); return -1; }
    return 0;
}
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
