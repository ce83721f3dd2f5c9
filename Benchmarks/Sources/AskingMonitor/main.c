// A C reader of rtnetlink that, after each batch of notifications, asks the kernel the questions
// NetReach's engine asks (nrb_floor_prepare_asking) and then writes one line per notification of
// the batch: the lower bound of `netreach watch` in DetectionLatency's CLI phase (--cli-asking),
// timed through the same pipe as `ip -o monitor` and `watch`.
//
//   AskingMonitor NETNS_PATH ADDRESS...   (the candidates, in NetReach's order)
#include <arpa/inet.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "CNetReachBench.h"

int main(int argc, char **argv) {
    // Ends with the harness, even stopped (SIGKILL is delivered to a stopped process).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 1;
    if (argc < 3) {
        fprintf(stderr, "usage: AskingMonitor NETNS_PATH ADDRESS...\n");
        return 2;
    }
    uint8_t v4[8 * 4], v6[8 * 16];
    int count4 = 0, count6 = 0;
    for (int i = 2; i < argc; i++) {
        if (count4 < 8 && inet_pton(AF_INET, argv[i], v4 + 4 * count4) == 1) { count4++; continue; }
        if (count6 < 8 && inet_pton(AF_INET6, argv[i], v6 + 16 * count6) == 1) { count6++; continue; }
        fprintf(stderr, "AskingMonitor: not an address (or more than 8 of a family): %s\n", argv[i]);
        return 2;
    }
    int fd = nrb_open_route_socket_in(argv[1], NRB_GROUPS_NETREACH, 4 << 20);
    if (fd < 0) { fprintf(stderr, "AskingMonitor: route socket: %s\n", strerror(-fd)); return 1; }
    int prepared = nrb_floor_prepare_asking(argv[1], v4, count4, v6, count6);
    if (prepared < 0) { fprintf(stderr, "AskingMonitor: asking: %s\n", strerror(-prepared)); return 1; }
    nrb_floor_set_output(STDOUT_FILENO);
    nrb_floor_set_asking(1);
    if (nrb_floor_start(fd, 1 << 20) != 0) { fprintf(stderr, "AskingMonitor: cannot start the reader\n"); return 1; }
    for (;;) pause(); // until a signal ends the process
}
