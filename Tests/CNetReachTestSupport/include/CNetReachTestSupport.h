#ifndef CNETREACH_TEST_SUPPORT_H
#define CNETREACH_TEST_SUPPORT_H

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor from
/// `from` up, so it inherits none of the test process's sockets and pipes. Glibc's Swift module
/// does not import it (it is a GNU extension).
int nrts_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from);

/// posix_spawn_file_actions_addchdir_np (glibc 2.29): the child starts in `path`.
int nrts_spawn_file_actions_addchdir(posix_spawn_file_actions_t *actions, const char *path);

#endif
