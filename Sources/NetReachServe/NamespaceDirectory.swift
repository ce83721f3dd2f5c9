import NetReachSystem

#if os(Linux)
import CNetReachLinux
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The network namespaces `ip netns` names, followed as they come and go: the entries of
/// `/run/netns` that are namespaces (`serve --all-namespaces`).
///
/// `ip netns add NAME` creates the file, then bind-mounts a namespace on it; `ip netns delete`
/// unmounts it, then removes the file. The file alone is not a namespace yet or any more, so the
/// directory's inotify events come too early or too late: a name counts while a namespace is
/// mounted on it (`statfs` says nsfs). Mounting and unmounting change `/proc/self/mountinfo`,
/// which `poll` reports (`POLLPRI`): the directory is read again then, and only then, with no timer.
///
/// ```swift
/// let directory = NamespaceDirectory { names in print(names) }   // ["blue", "red"], then each change
/// directory.start()
/// directory.cancel()
/// ```
package final class NamespaceDirectory: Sendable {
    /// Where `ip netns` keeps its namespaces.
    package let directory: String
    private let onChange: @Sendable ([String]) -> Void
    private let onWarning: @Sendable (String) -> Void
    private let mountTable: String
    /// The eventfd that stops the thread (-1 until started), and whether ``cancel()`` was called.
    private let control = Locked((stop: Int32(-1), isCancelled: false))

    /// - Parameters:
    ///   - onChange: the names, sorted: once at start, then whenever the set changes; on the
    ///     directory's thread.
    ///   - onWarning: why changes will not be followed, when they cannot be.
    package init(
        directory: String = "/run/netns", mountTable: String = "/proc/self/mountinfo",
        onWarning: @escaping @Sendable (String) -> Void = { _ in },
        onChange: @escaping @Sendable ([String]) -> Void
    ) {
        self.directory = directory
        self.mountTable = mountTable
        self.onWarning = onWarning
        self.onChange = onChange
    }

    /// The names in `directory` on which a network namespace is mounted, sorted.
    package static func names(in directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name != ".", name != "..", isNamespace("\(directory)/\(name)") else { continue }
            names.append(name)
        }
        return names.sorted()
    }

    /// Whether a network namespace (nsfs) is mounted on `path`.
    static func isNamespace(_ path: String) -> Bool {
        var status = statfs()
        guard statfs(path, &status) == 0 else { return false }
        return UInt64(bitPattern: Int64(status.f_type)) == nsfsMagic
    }

    /// `NSFS_MAGIC` of `<linux/magic.h>`.
    static let nsfsMagic: UInt64 = 0x6E73_6673

    /// Reads the directory, reports it, and follows it on a thread of its own until ``cancel()``.
    package func start() {
        let stop = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard stop >= 0 else {
            // No way to stop a thread that waits: report what is there now, and follow nothing.
            let reason = SystemError.current
            if !isCancelled { onChange(Self.names(in: directory)) }
            onWarning("cannot follow \(directory) (eventfd: \(reason)): namespaces added later are not watched")
            return
        }
        let mounts = open(mountTable, O_RDONLY | O_CLOEXEC)
        control.withLock { $0.stop = stop }
        BlockingWork.start(named: "netreach-netns") { [self] in
            follow(mounts: mounts, stop: stop)
            if mounts >= 0 { close(mounts) }
            control.withLock { control in
                control.stop = -1
                close(stop)
            }
        }
    }

    /// Stops following. A change being reported as this is called may still arrive.
    package func cancel() {
        control.withLock { control in
            control.isCancelled = true
            if control.stop >= 0 { SystemCall.signal(eventDescriptor: control.stop) }
        }
    }

    private var isCancelled: Bool { control.withLock { $0.isCancelled } }

    private func follow(mounts: Int32, stop: Int32) {
        var known = Self.names(in: directory)
        if isCancelled { return }
        onChange(known)
        guard mounts >= 0 else {
            onWarning(
                "cannot read \(mountTable) (\(SystemError.current)): namespaces added to \(directory) later are not followed"
            )
            return
        }
        while true {
            // The mount table is "readable" always; a change shows as POLLPRI (and POLLERR), once:
            // poll itself takes note that it was seen.
            var descriptors = [
                pollfd(fd: stop, events: Int16(POLLIN), revents: 0),
                pollfd(fd: mounts, events: Int16(POLLPRI), revents: 0),
            ]
            guard (try? SystemCall.poll(&descriptors, timeout: nil)) != nil else { return }
            if descriptors[0].revents != 0 { return }
            guard descriptors[1].revents & Int16(POLLPRI | POLLERR) != 0 else { continue }
            let names = Self.names(in: directory)
            guard names != known else { continue }
            known = names
            if isCancelled { return }
            onChange(names)
        }
    }
}
