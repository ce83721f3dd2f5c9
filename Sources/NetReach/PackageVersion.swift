/// NetReach's version: `netreach --version`, the `version` key of every JSON line, `get`'s
/// User-Agent and serve's `netreach_build_info`.
package enum PackageVersion {
    package static let current = "0.22.0"
}
