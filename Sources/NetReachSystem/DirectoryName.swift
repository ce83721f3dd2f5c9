extension String {
    /// The directory a file name is in, as `dirname(1)` and Foundation's
    /// `deletingLastPathComponent` give it: trailing and doubled slashes dropped, `.` for a name
    /// without a directory, `/` for one at the root.
    ///
    /// ```swift
    /// "/etc/netreach/web.yml".directoryName   // "/etc/netreach"
    /// "web.yml".directoryName                 // "."
    /// "/var/run/netns/blue".directoryName     // "/var/run/netns"
    /// ```
    package var directoryName: String {
        var path = Substring(self)
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        guard let slash = path.lastIndex(of: "/") else { return "." }
        var directory = path[..<slash]
        while directory.hasSuffix("/") { directory.removeLast() }
        return directory.isEmpty ? "/" : String(directory)
    }
}
