#!/usr/bin/python3
"""Runs a command under the sandbox a systemd unit's [Service] section asks for, for real.

    /usr/bin/python3 run_under_unit.py UNIT [--uid UID] [--setenv NAME=VALUE]... [--credentials DIR] -- COMMAND ARGS...
    /usr/bin/python3 run_under_unit.py UNIT --print-filter

`systemd-analyze verify` reads a unit's settings but never runs the service under them: a
SystemCallFilter= that kills the service as it starts verifies cleanly. This script applies the
settings below to itself, as systemd's service manager would before it executes ExecStart, and
then executes COMMAND (as given: ExecStart= itself is not read). It must run as root, with
Debian's /usr/bin/python3 (python3-seccomp installs the libseccomp binding for it only).

Emulated, with systemd's semantics (systemd.exec(5)):
- SystemCallFilter=: each line in order. The first line's form decides the mode: an allow-list
  (which also allows @default), or a deny-list for `~`. Later lines of the other form take their
  calls out of the list. Groups (@name) are expanded, recursively, from what the systemd on this
  machine says they hold (`systemd-analyze syscall-filter`); names this architecture lacks are
  skipped, as systemd skips them. An empty assignment starts over.
- SystemCallErrorNumber=: what a call the filter refuses gets: that errno, or, when unset (or
  `kill`), the whole process is killed with SIGSYS (status 159), as systemd does.
- SystemCallArchitectures=native: calls of other ABIs (i386, x32) kill the process.
- RestrictAddressFamilies=: socket() with another family fails with EAFNOSUPPORT.
- MemoryDenyWriteExecute=yes: mmap of memory both writable and executable, mprotect and
  pkey_mprotect adding PROT_EXEC, and shmat with SHM_EXEC fail with EPERM (systemd 252's seccomp
  rules; later systemd uses prctl(PR_SET_MDWE), with the same effect on these calls).
- RestrictNamespaces=yes: setns() fails with EPERM, and so do unshare() and clone() asking for a
  new namespace; clone3(), whose flags seccomp cannot see, fails with ENOSYS (libc then uses clone).
- LockPersonality=yes: personality() to anything but the current one (PER_LINUX) fails with EPERM.
- NoNewPrivileges=: set (it is also implied: an unprivileged process can load a filter only so).
- LimitNOFILE=: soft and hard limit (`N` or `SOFT:HARD`, `infinity`); where this process may not
  raise its hard limit (a container's root without CAP_SYS_RESOURCE), as high as it may, said on
  standard error.
- DynamicUser=yes: a uid (and gid) of systemd's dynamic range with no supplementary groups
  (--uid picks another); User=/Group= are looked up. Without either, the command runs as root.
- CapabilityBoundingSet=, AmbientCapabilities=: the bounding set is reduced to the first (empty:
  no capabilities at all), and the second ones are raised as ambient capabilities, so they are
  the command's effective ones although it does not run as root.
- WatchdogSec=: WATCHDOG_USEC and WATCHDOG_PID (the command keeps this process's id).
- LoadCredential=ID:PATH: PATH copied to DIR/ID (DIR: --credentials, an empty directory the
  caller made and removes; systemd's is /run/credentials/UNIT), the directory 0500 and each file
  0400, owned by the service's user; CREDENTIALS_DIRECTORY names it.
- The environment is systemd's, not the caller's: PATH, USER, LOGNAME, HOME, SHELL,
  INVOCATION_ID, then each --setenv (NOTIFY_SOCKET, for one). The working directory is /.

Not emulated (each is systemd mounting, or a cgroup, a namespace or a device of its own, which
the command does not see as a refused call but as a file system or device it cannot write or
find): ProtectSystem=, ProtectHome=, PrivateTmp=, PrivateDevices= (its device list; the @raw-io
calls it refuses are in @privileged), ProtectKernelTunables=, ProtectKernelModules=,
ProtectKernelLogs=, ProtectControlGroups=, ProtectClock=, ProtectHostname= (the calls these refuse
are @module, syslog, @clock and sethostname, all refused by @privileged here already),
RestrictRealtime= (sched_setscheduler, also in @resources), RestrictSUIDSGID= (chmod with set-id
bits: nothing serve does). Type=notify, Restart= and ExecReload= are the caller's to play: it is
systemd in this picture.

--print-filter prints, one per line, `allow NAME` or `deny NAME` for every call the main filter
names, then the action of the others, and exits.
"""
import ctypes
import errno
import os
import pwd
import random
import socket
import subprocess
import sys

import seccomp

PR_CAPBSET_DROP = 24
PR_SET_KEEPCAPS = 8
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
CAPABILITY_VERSION_3 = 0x20080522
# systemd's range for DynamicUser= (61184-65519).
DYNAMIC_UIDS = (61184, 65519)

libc = ctypes.CDLL(None, use_errno=True)


def fail(message):
    print(f"run_under_unit: {message}", file=sys.stderr)
    sys.exit(125)


def service_settings(path):
    """The [Service] section's assignments in order, as (key, value); continuation lines joined."""
    settings, section, pending = [], None, ""
    with open(path, encoding="utf-8") as unit:
        for raw in unit:
            line = pending + raw.strip()
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
            elif section == "[Service]" and "=" in line:
                key, value = line.split("=", 1)
                settings.append((key.strip(), value.strip()))
    return settings


def syscall_groups():
    """Every group `systemd-analyze syscall-filter` knows: name -> its entries (calls and @groups)."""
    text = subprocess.run(
        ["systemd-analyze", "syscall-filter"], check=True, capture_output=True, text=True
    ).stdout
    groups, current = {}, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            # A group's name, or a comment at the margin (the list of ungrouped calls) ending it.
            current = line.strip() if line.startswith("@") else None
            if current:
                groups[current] = []
            continue
        entry = line.strip()
        if current and not entry.startswith("#"):
            groups[current].append(entry)
    return groups


def expand(name, groups, seen=()):
    """The system calls `name` (a call or a @group) stands for."""
    if not name.startswith("@"):
        return {name}
    if name not in groups:
        fail(f"systemd does not know the group {name}")
    if name in seen:
        return set()
    calls = set()
    for entry in groups[name]:
        calls |= expand(entry, groups, seen + (name,))
    return calls


def system_call_filter(values, groups):
    """(allow_list, calls): systemd's reading of the SystemCallFilter= lines in order."""
    allow_list, calls = None, set()
    for value in values:
        if not value:
            allow_list, calls = None, set()
            continue
        invert = value.startswith("~")
        words = value[1:].split() if invert else value.split()
        if allow_list is None:
            allow_list = not invert
            if allow_list:
                calls |= expand("@default", groups)
        for word in words:
            if ":" in word:
                fail(f"per-call errno ({word}) is not emulated")
            named = expand(word, groups)
            # Same form as the first line: the calls join the list; the other form: they leave it.
            if invert != allow_list:
                calls |= named
            else:
                calls -= named
    return allow_list, calls


def native_number(name):
    try:
        number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    except (ValueError, RuntimeError):
        return None
    return number if number >= 0 else None


def error_action(value):
    if value in ("", "kill"):
        return seccomp.KILL_PROCESS
    number = int(value) if value.isdigit() else getattr(errno, value, None)
    if number is None:
        fail(f"unknown SystemCallErrorNumber={value}")
    return seccomp.ERRNO(number)


def boolean(value):
    return value.lower() in ("1", "yes", "true", "on")


CAPABILITIES = [
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
]  # <linux/capability.h>, in number order


def capability_numbers(value):
    """Capability names (CAP_SYS_ADMIN ...) as numbers."""
    numbers = set()
    for name in value.split():
        if not name.upper().startswith("CAP_") or name.upper()[4:] not in CAPABILITIES:
            fail(f"unknown capability {name}")
        numbers.add(CAPABILITIES.index(name.upper()[4:]))
    return numbers


def prctl(*arguments):
    if libc.prctl(*[ctypes.c_ulong(a) for a in arguments] + [ctypes.c_ulong(0)] * (5 - len(arguments))) != 0:
        code = ctypes.get_errno()
        fail(f"prctl{arguments}: {os.strerror(code)}")


def set_capabilities(numbers):
    """capset(): `numbers` permitted, effective and inheritable (so they can be ambient)."""
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    mask = sum(1 << n for n in numbers)
    data = (Data * 2)()
    for index in range(2):
        word = (mask >> (32 * index)) & 0xFFFFFFFF
        data[index].effective = data[index].permitted = data[index].inheritable = word
    if libc.capset(ctypes.byref(Header(CAPABILITY_VERSION_3, 0)), data) != 0:
        fail(f"capset: {os.strerror(ctypes.get_errno())}")


def extra_filters(settings):
    """The filters of the settings besides SystemCallFilter=, each allowing what it does not name."""
    filters = []
    families = settings.get("RestrictAddressFamilies", "")
    if families and families != "none":
        invert = families.startswith("~")
        named = {getattr(socket, name) for name in families.lstrip("~").split()}
        refused = set(named) if invert else {f for f in range(64) if f not in named}
        refuse = seccomp.SyscallFilter(seccomp.ALLOW)
        for family in sorted(refused):
            refuse.add_rule(seccomp.ERRNO(errno.EAFNOSUPPORT), "socket", seccomp.Arg(0, seccomp.EQ, family))
        if not invert:
            refuse.add_rule(seccomp.ERRNO(errno.EAFNOSUPPORT), "socket", seccomp.Arg(0, seccomp.GE, 64))
        filters.append(refuse)
    if boolean(settings.get("MemoryDenyWriteExecute", "no")):
        write_exec = 0x2 | 0x4  # PROT_WRITE | PROT_EXEC
        refuse = seccomp.SyscallFilter(seccomp.ALLOW)
        refuse.add_rule(seccomp.ERRNO(errno.EPERM), "mmap", seccomp.Arg(2, seccomp.MASKED_EQ, write_exec, write_exec))
        for call in ("mprotect", "pkey_mprotect"):
            refuse.add_rule(seccomp.ERRNO(errno.EPERM), call, seccomp.Arg(2, seccomp.MASKED_EQ, 0x4, 0x4))
        refuse.add_rule(seccomp.ERRNO(errno.EPERM), "shmat", seccomp.Arg(2, seccomp.MASKED_EQ, 0o100000, 0o100000))
        filters.append(refuse)
    namespaces = settings.get("RestrictNamespaces", "no")
    if namespaces != "no":
        if namespaces != "yes":
            fail(f"RestrictNamespaces={namespaces}: only yes is emulated")
        refuse = seccomp.SyscallFilter(seccomp.ALLOW)
        refuse.add_rule(seccomp.ERRNO(errno.EPERM), "setns")
        refuse.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
        for flag in (0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000):
            for call in ("unshare", "clone"):
                refuse.add_rule(seccomp.ERRNO(errno.EPERM), call, seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        filters.append(refuse)
    if boolean(settings.get("LockPersonality", "no")):
        refuse = seccomp.SyscallFilter(seccomp.ALLOW)
        refuse.add_rule(seccomp.ERRNO(errno.EPERM), "personality", seccomp.Arg(0, seccomp.NE, 0))
        filters.append(refuse)
    return filters


def main():
    arguments = sys.argv[1:]
    if not arguments:
        fail("usage: run_under_unit.py UNIT [--uid UID] [--setenv NAME=VALUE]... -- COMMAND ARGS...")
    unit, arguments = arguments[0], arguments[1:]
    uid, environment, print_filter, credentials = None, {}, False, None
    while arguments and arguments[0] != "--":
        option = arguments.pop(0)
        if option == "--uid":
            uid = int(arguments.pop(0))
        elif option == "--setenv":
            name, value = arguments.pop(0).split("=", 1)
            environment[name] = value
        elif option == "--credentials":
            credentials = arguments.pop(0)
        elif option == "--print-filter":
            print_filter = True
        else:
            fail(f"unknown option {option}")
    command = arguments[1:]
    if not command and not print_filter:
        fail("no command after --")

    assignments = service_settings(unit)
    settings = dict(assignments)  # the last assignment of each, except SystemCallFilter=
    groups = syscall_groups()
    allow_list, calls = system_call_filter([v for k, v in assignments if k == "SystemCallFilter"], groups)
    refused = error_action(settings.get("SystemCallErrorNumber", ""))
    architectures = settings.get("SystemCallArchitectures", "")
    if architectures not in ("", "native"):
        fail(f"SystemCallArchitectures={architectures}: only native is emulated")
    known = sorted(name for name in calls if native_number(name) is not None)

    if print_filter:
        for name in known:
            print(f"{'allow' if allow_list else 'deny'} {name}")
        if allow_list is not None:
            others = "allow" if not allow_list else ("kill" if refused == seccomp.KILL_PROCESS else "errno")
            print(f"others {others}")
        return

    if os.geteuid() != 0:
        fail("must run as root (it sets up a user, capabilities and limits, as systemd does)")

    # The main filter, built now; loaded last, since it may refuse seccomp() itself.
    main_filter = None
    if allow_list is not None:
        main_filter = seccomp.SyscallFilter(refused if allow_list else seccomp.ALLOW)
        for name in known:
            main_filter.add_rule(seccomp.ALLOW if allow_list else refused, name)
        if architectures == "native":
            main_filter.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    filters = extra_filters(settings)

    limit = settings.get("LimitNOFILE")
    if limit:
        import resource
        parts = [resource.RLIM_INFINITY if p == "infinity" else int(p) for p in limit.split(":")]
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (parts[0], parts[-1]))
        except ValueError:
            # Raising the hard limit takes CAP_SYS_RESOURCE, which a container's root may lack
            # (systemd, as PID 1 of the machine, has it): then as high as this process may go.
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            print(f"run_under_unit: LimitNOFILE={limit}: only {hard} here (no CAP_SYS_RESOURCE)", file=sys.stderr)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(parts[0], hard), min(parts[-1], hard)))

    user = None
    if boolean(settings.get("DynamicUser", "no")):
        user = (uid, uid) if uid is not None else (random.randint(*DYNAMIC_UIDS),) * 2
    elif settings.get("User"):
        entry = pwd.getpwnam(settings["User"])
        user = (entry.pw_uid, entry.pw_gid)
    if user and settings.get("Group"):
        import grp
        user = (user[0], grp.getgrnam(settings["Group"]).gr_gid)

    loaded = [v for k, v in assignments if k == "LoadCredential"]
    if loaded:
        if not credentials:
            fail("LoadCredential= needs --credentials DIR")
        owner = user or (0, 0)
        for value in loaded:
            name, _, source = value.partition(":")
            with open(source, "rb") as original, open(os.path.join(credentials, name), "wb") as copy:
                copy.write(original.read())
            os.chown(os.path.join(credentials, name), owner[0], owner[1])
            os.chmod(os.path.join(credentials, name), 0o400)
        os.chown(credentials, owner[0], owner[1])
        os.chmod(credentials, 0o500)
        environment.setdefault("CREDENTIALS_DIRECTORY", credentials)

    ambient = capability_numbers(settings.get("AmbientCapabilities", ""))
    if "CapabilityBoundingSet" in settings:
        bounding = capability_numbers(settings["CapabilityBoundingSet"].lstrip("~"))
        if settings["CapabilityBoundingSet"].startswith("~"):
            bounding = set(range(64)) - bounding
        with open("/proc/sys/kernel/cap_last_cap") as last:
            for capability in range(int(last.read()) + 1):
                if capability not in bounding:
                    prctl(PR_CAPBSET_DROP, capability)
    if user:
        if ambient:
            prctl(PR_SET_KEEPCAPS, 1)
        os.setgroups([])
        os.setresgid(user[1], user[1], user[1])
        os.setresuid(user[0], user[0], user[0])
    if ambient:
        set_capabilities(ambient)
        for capability in sorted(ambient):
            prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, capability)
    if boolean(settings.get("NoNewPrivileges", "no")) or user or main_filter or filters:
        prctl(PR_SET_NO_NEW_PRIVS, 1)

    names = pwd.getpwuid(user[0]) if user and not settings.get("DynamicUser") else None
    child_environment = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                         "INVOCATION_ID": "%032x" % random.getrandbits(128)}
    if user:
        name = names.pw_name if names else f"dynamic-{user[0]}"
        child_environment.update(USER=name, LOGNAME=name, HOME="/", SHELL="/usr/sbin/nologin")
    watchdog = settings.get("WatchdogSec")
    if watchdog:
        seconds = float(watchdog.rstrip("s")) if not watchdog.endswith("min") else 60 * float(watchdog[:-3])
        child_environment.update(WATCHDOG_USEC=str(int(seconds * 1_000_000)), WATCHDOG_PID=str(os.getpid()))
    child_environment.update(environment)
    os.chdir("/")

    for extra in filters:
        extra.load()
    if main_filter:
        main_filter.load()
    try:
        os.execve(command[0], command, child_environment)
    except OSError as error:
        print(f"run_under_unit: cannot run {command[0]}: {error}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
