#if os(Linux)
/// Rtnetlink datagrams read into a ``SystemSnapshot`` by the engine's own stages, with no socket:
/// each message parsed by ``RtnetlinkParser``, a dump's replies applied to the ``SnapshotStore`` as
/// the engine's resync applies them, notifications absorbed as its `drain` absorbs them, against
/// the lookups of a default configuration. A malformed message is skipped and counted, as the
/// engine skips it.
///
/// What the engine adds needs the system and is not here: the sysfs facts of a new link, and the
/// kernel's route choices (a snapshot without them is judged from its main-table default routes,
/// ``SystemSnapshot/emulatedRouteLookup(for:through:)``). `NetReachTesting.RecordedNetwork` replays
/// recorded datagrams through it.
package struct NetlinkReader: Sendable {
    private var store = SnapshotStore()
    /// What a default engine's lookups ask about, before any answer named a gateway.
    private let watch = SnapshotStore.LookupWatch(
        addresses: SystemPathSource.Configuration.defaultRouteLookupAddresses)
    /// The messages skipped because they could not be parsed.
    package private(set) var malformedMessages = 0

    package init() {}

    /// The links, addresses and default routes read so far.
    package var snapshot: SystemSnapshot { store.snapshot }

    /// Applies one datagram of a dump's replies; returns whether the snapshot changed.
    package mutating func applyDump(_ datagram: UnsafeRawBufferPointer) -> Bool {
        var changed = false
        for result in RtnetlinkParser.Messages(datagram) {
            switch result {
            case .success(let envelope): changed = store.apply(envelope.message) || changed
            case .failure: malformedMessages += 1
            }
        }
        return changed
    }

    /// Absorbs one datagram of notifications; returns whether the snapshot changed.
    package mutating func absorb(_ datagram: UnsafeRawBufferPointer) -> Bool {
        var changed = false
        for result in RtnetlinkParser.Messages(datagram) {
            switch result {
            case .success(let envelope): changed = store.absorb(envelope.message, watching: watch).changed || changed
            case .failure: malformedMessages += 1
            }
        }
        return changed
    }
}
#endif
