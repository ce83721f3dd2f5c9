#ifdef __linux__
#define _GNU_SOURCE
#include <sched.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "CNetReachLinux.h"

int cnr_setns_net(int fd) { return setns(fd, CLONE_NEWNET); }
int cnr_gettid(void) { return (int)syscall(SYS_gettid); }
#endif
