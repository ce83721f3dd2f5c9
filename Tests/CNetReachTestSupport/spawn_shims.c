// The GNU extensions of <spawn.h>, declared only with _GNU_SOURCE, which the Swift side must not
// see (it changes Glibc's module); defined here, in this file alone.
#define _GNU_SOURCE
#include <spawn.h>
#include "CNetReachTestSupport.h"

int nrts_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int nrts_spawn_file_actions_addchdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}
