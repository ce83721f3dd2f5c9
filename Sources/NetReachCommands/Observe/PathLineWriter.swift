import ArgumentParser
import NetReach
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `watch`'s lines, written on the thread that computed each path (the monitor's
/// ``PathMonitor/updateObserver``): a change reaches standard output with no thread hop and no
/// stream between, as `ip monitor` prints what it reads. A line per change of the path, stamped
/// with the update's time; an update that only changed what the path was judged from (a route's
/// table, an unused interface) writes nothing.
///
/// Until ``arm()`` it only keeps the latest path, so nothing is written for a monitor that fails to
/// start (the command says why instead); armed, it writes the kept path and then each one as it
/// comes. It ends at the first of: ``finish(_:)`` (a signal, the reader gone), a write that fails,
/// or a path that says the monitor stopped observing (written first). ``ending()`` waits for that.
///
/// A reader that stops reading blocks the write, and with it the monitor's engine: the kernel keeps
/// the changes meanwhile (the engine's socket buffer), and the engine re-reads the whole state if
/// they overflow it, so the next line is the path as it is then, not a backlog held in memory.
final class PathLineWriter: Sendable {
    /// Why `watch` ends.
    enum Ending: Sendable, Equatable {
        /// SIGINT or SIGTERM: status 0, every line already written.
        case interrupted
        /// A failed write, the reader gone, or a monitor that stopped observing.
        case failed(ExitCode)
    }

    private struct State {
        var armed = false
        var held: PathUpdate?
        /// The last path received, written or held: an update with the same path is no change.
        var last: NetworkPath?
        var ending: Ending?
        var waiter: CheckedContinuation<Ending, Never>?
    }

    private let state = Locked(State())
    private let json: Bool
    private let failure: @Sendable () -> PathMonitorError?
    private let complain: @Sendable (String) -> Void
    /// Writes one line's bytes, its newline included.
    private let write: @Sendable (UnsafeRawBufferPointer) throws(ExitCode) -> Void

    init(
        json: Bool, failure: @escaping @Sendable () -> PathMonitorError?,
        complain: @escaping @Sendable (String) -> Void = { StandardStream.complain($0) },
        write: @escaping @Sendable (UnsafeRawBufferPointer) throws(ExitCode) -> Void
    ) {
        self.json = json
        self.failure = failure
        self.complain = complain
        self.write = write
    }

    /// An update from the monitor: its path written now if armed and changed, otherwise kept
    /// until ``arm()``.
    func receive(_ pathUpdate: PathUpdate) {
        update { state in
            guard state.ending == nil, state.last != pathUpdate.path else { return }
            state.last = pathUpdate.path
            guard state.armed else {
                state.held = pathUpdate
                return
            }
            writeLine(for: pathUpdate, in: &state)
        }
    }

    /// Starts writing: the latest path first (the current one), then every change.
    func arm() {
        update { state in
            state.armed = true
            guard state.ending == nil, let held = state.held else { return }
            state.held = nil
            writeLine(for: held, in: &state)
        }
    }

    /// Ends the writing (later paths are dropped), unless it has ended already; `ending` is only
    /// evaluated then (making a failure status says why on standard error).
    func finish(_ ending: @autoclosure () -> Ending) {
        update { state in
            if state.ending == nil { state.ending = ending() }
        }
    }

    /// Waits until the writing has ended, and says why.
    func ending() async -> Ending {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state -> Ending? in
                if let ending = state.ending { return ending }
                state.waiter = continuation
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// Runs `body` with the lock held (so lines leave in order); if it ended the writing, resumes
    /// whoever waits in ``ending()``, after the lock is released.
    private func update(_ body: (inout State) -> Void) {
        let (waiter, ending) = state.withLock { state -> (CheckedContinuation<Ending, Never>?, Ending?) in
            let endedBefore = state.ending != nil
            body(&state)
            guard !endedBefore, let ending = state.ending else { return (nil, nil) }
            defer { state.waiter = nil }
            return (state.waiter, ending)
        }
        if let waiter, let ending { waiter.resume(returning: ending) }
    }

    /// Writes the line of `pathUpdate`'s path; a failed write, or a path that says the monitor
    /// stopped observing (after its line), ends the writing.
    private func writeLine(for pathUpdate: PathUpdate, in state: inout State) {
        let (path, date) = (pathUpdate.path, pathUpdate.time)
        do throws(ExitCode) {
            if json {
                // The JSON's bytes and its newline, written from the buffer they were made in.
                var line = JSONBuffer(capacity: 384)
                PathJSON.write(path, at: date, into: &line)
                line.append(byte: UInt8(ascii: "\n"))
                try line.withBytes(write)
            } else {
                try StandardStream.withLine(PathFormatting.timestampedLine(path, at: date), write)
            }
        } catch {
            state.ending = .failed(error)
            return
        }
        if path.unsatisfiedReason == .monitorUnavailable {
            state.ending = .failed(MonitorOptions.stoppedObserving(failure(), complain: complain))
        }
    }
}
