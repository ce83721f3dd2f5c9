import Foundation
import NetReach

/// `NotificationCenter` for a ``PathMonitor``: Apple-platform code that listens for path changes
/// as notifications keeps doing so. A module of its own because `NotificationCenter` is full
/// Foundation's, which NetReach itself does not link (Docs/DesignNotes.md, "No full Foundation in
/// the core").
///
/// ```swift
/// import NetReach
/// import NetReachNotifications
///
/// let monitor = PathMonitor()
/// monitor.postsNotifications = true
/// let token = NotificationCenter.default.addObserver(
///     forName: PathMonitor.pathDidChangeNotification, object: monitor, queue: nil
/// ) { note in
///     if let path = note.userInfo?[PathMonitor.pathUserInfoKey] as? NetworkPath { print(path) }
/// }
/// monitor.start(queue: DispatchQueue(label: "paths"))
/// ```
extension PathMonitor {
    /// Posted on `NotificationCenter.default` after each change when ``postsNotifications`` is on;
    /// the object is the monitor and `userInfo[PathMonitor.pathUserInfoKey]` the new ``NetworkPath``.
    public static let pathDidChangeNotification = Notification.Name("NetReachPathDidChange")
    /// The `userInfo` key of ``pathDidChangeNotification`` holding the ``NetworkPath``.
    public static let pathUserInfoKey = "path"

    /// When `true`, each change is also posted as ``pathDidChangeNotification`` on
    /// `NotificationCenter.default`, on the start queue after the handler. Off by default.
    public var postsNotifications: Bool {
        get { changePoster != nil }
        set {
            guard newValue else {
                changePoster = nil
                return
            }
            changePoster = { @Sendable monitor, path in
                NotificationCenter.default.post(
                    name: PathMonitor.pathDidChangeNotification, object: monitor,
                    userInfo: [PathMonitor.pathUserInfoKey: path])
            }
        }
    }
}
