#ifndef CNETREACH_NAMESPACE_ENTRY_H
#define CNETREACH_NAMESPACE_ENTRY_H

/// The environment variables that make netreach start inside a network namespace (see
/// namespace_entry.c): the namespace file, and for an `ip netns` name the name, whose
/// /etc/netns/NAME files are bind-mounted over /etc as `ip netns exec` does.
#define CNR_NETNS_PATH_VARIABLE "NETREACH_ENTER_NETNS"
#define CNR_NETNS_NAME_VARIABLE "NETREACH_ENTER_NETNS_NAME"

/// 1 if this process entered a namespace at start-up.
int cnr_netns_entered(void);

/// Why entering failed (a static string naming the step and errno's message), or NULL.
const char *cnr_netns_entry_error(void);

#endif
