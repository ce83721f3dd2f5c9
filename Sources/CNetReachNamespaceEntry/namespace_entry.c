// `netreach check --namespace NAME` probes from inside another network namespace. Its sockets are
// made by SwiftNIO's threads, so the whole process must be in the namespace, and entering a mount
// namespace (for /etc/netns/NAME/resolv.conf, as `ip netns exec` does) is refused to a process
// with threads. So the command re-executes itself with these variables set, and this constructor
// enters the namespace first thing, while the process has one thread and before the Swift runtime
// starts any. Linked into the netreach executable (through NetReachCommands).
#define _GNU_SOURCE
#include "CNetReachNamespaceEntry.h"
#include "CNetReachLinux.h"

#if defined(__linux__)
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static int entered = 0;
static char error_text[512];

static void fail(const char *step) {
    snprintf(error_text, sizeof error_text, "%s: %s", step, strerror(errno));
}

__attribute__((constructor(101))) static void cnr_enter_netns_at_start(void) {
    const char *path = getenv(CNR_NETNS_PATH_VARIABLE);
    if (path == NULL || *path == '\0') return;
    char *name = getenv(CNR_NETNS_NAME_VARIABLE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { fail("opening the namespace"); goto done; }
    if (setns(fd, CLONE_NEWNET) != 0) { close(fd); fail("entering the namespace"); goto done; }
    close(fd);
    if (name != NULL && *name != '\0') {
        // A mount namespace of our own, whose changes never reach the machine's.
        if (unshare(CLONE_NEWNS) != 0) { fail("unsharing the mount namespace"); goto done; }
        if (mount("", "/", "none", MS_SLAVE | MS_REC, NULL) != 0) { fail("making / a slave mount"); goto done; }
        // /sys as the namespace sees it (interface classification reads /sys/class/net).
        if (umount2("/sys", MNT_DETACH) == 0) {
            if (mount(name, "/sys", "sysfs", 0, NULL) != 0) { fail("mounting /sys"); goto done; }
        }
        char step[256];
        if (cnr_bind_netns_etc(name, step) != 0) {
            snprintf(error_text, sizeof error_text, "%s: %s", step, strerror(errno));
            goto done;
        }
    }
    entered = 1;
done:
    unsetenv(CNR_NETNS_PATH_VARIABLE);
    unsetenv(CNR_NETNS_NAME_VARIABLE);
}

int cnr_netns_entered(void) { return entered; }
const char *cnr_netns_entry_error(void) { return error_text[0] ? error_text : NULL; }
#else
int cnr_netns_entered(void) { return 0; }
const char *cnr_netns_entry_error(void) { return NULL; }
#endif
