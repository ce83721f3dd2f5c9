import NetReachSystem
import ServiceLifecycle
import UnixSignals

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Re-reads what `serve` watches and applies it: on SIGHUP, and on `POST /-/reload` when the
/// lifecycle API is enabled. A configuration that cannot be read or is not valid changes nothing:
/// the server goes on watching what it watched, and `netreach_config_last_reload_successful`
/// says 0 until a reload succeeds.
///
/// ```swift
/// let reloader = ServeReloader(load: { try ServeTargets(file) }, watch: watch, state: state)
/// switch await reloader.reload() {
/// case .success: print("reloaded")
/// case .failure(let error): print("kept the running configuration: \(error)")
/// }
/// ```
package final class ServeReloader: Service, Sendable {
    /// Why a reload changed nothing: what the loader threw, described.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package var description: String

        package init(description: String) { self.description = description }
    }

    private let load: @Sendable () throws -> ServeTargets
    private let watch: NetworkWatch
    private let state: ServeState
    private let ordering = Locked(())

    /// - Parameter load: reads the configuration afresh and returns what to watch; throws when it
    ///   cannot be read or is not valid (its description is the reason given).
    package init(load: @escaping @Sendable () throws -> ServeTargets, watch: NetworkWatch, state: ServeState) {
        self.load = load
        self.watch = watch
        self.state = state
    }

    /// Reloads on every SIGHUP until the group shuts down.
    package func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            _ = await reload()
        }
    }

    /// Reads the configuration and watches what it names; returns once the new paths have been
    /// read. Reloads apply in the order they were asked for.
    package func reload() async -> Result<Void, Failure> {
        // Read and handed to the watch under one lock: two reloads at once cannot apply the older
        // file last.
        let loaded: Result<Void, Failure> = ordering.withLock { _ in
            do {
                watch.schedule(try load())
                return .success(())
            } catch {
                return .failure(Failure(description: "\(error)"))
            }
        }
        guard case .success = loaded else {
            state.recordReload(succeeded: false, at: Date())
            return loaded
        }
        await watch.untilRead(timeout: .seconds(10))
        state.recordReload(succeeded: true, at: Date())
        return .success(())
    }
}
