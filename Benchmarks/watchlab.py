"""The namespace `watch-cpu.py` and `watch-stages.py` watch, and the route changes they make in it.

A namespace of its own: lo, a veth pair a0/b0 (both up, so nothing is sent anywhere but the
peer), 192.0.2.2/24 on a0 and a default route via 192.0.2.1. The changes delete the default
route and add it back, GAP seconds after each.
"""
import subprocess
import time


def ip(namespace, *words):
    subprocess.run(["ip", "-n", namespace, *words], check=True)


def make(namespace):
    """Adds the namespace (the caller deletes it: `remove`)."""
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    ip(namespace, "link", "set", "lo", "up")
    ip(namespace, "link", "add", "a0", "type", "veth", "peer", "name", "b0")
    ip(namespace, "link", "set", "a0", "up")
    ip(namespace, "link", "set", "b0", "up")
    ip(namespace, "addr", "add", "192.0.2.2/24", "dev", "a0")
    ip(namespace, "route", "add", "default", "via", "192.0.2.1")


def remove(namespace):
    subprocess.run(["ip", "netns", "del", namespace], check=False)


def flap(namespace, flaps, gap):
    """Deletes and re-adds the default route `flaps` times: 2 × flaps changes, `gap` s apart."""
    for _ in range(flaps):
        ip(namespace, "route", "del", "default")
        time.sleep(gap)
        ip(namespace, "route", "add", "default", "via", "192.0.2.1")
        time.sleep(gap)
