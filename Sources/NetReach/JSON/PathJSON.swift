#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// NetReach's JSON for a path: the object `status --json` prints, every `watch --json` line and
/// every serve `path` event carries. One object on one line, the path's own `Codable` keys sorted,
/// plus `version` (NetReach's) and `timestamp` (ISO 8601 UTC with milliseconds) when a date is
/// given; every key is present, `unsatisfiedReason` is `null` when the path is satisfied.
/// `Docs/netreach-json.schema.json` describes the object.
///
/// Written by hand into a ``JSONBuffer``, byte for byte what `JSONEncoder` (sorted keys, slashes
/// unescaped) makes of the same path (`JSONParityTests` holds the two together): the encoder's
/// generic machinery was a fifth of `watch --json`'s CPU time per change.
///
/// ```swift
/// PathJSON.line(.unsatisfied(.linkDown))
/// // {"availableInterfaces":[],"gateways":[],"isConstrained":false,...,"unsatisfiedReason":"linkDown","version":"0.22.0"}
/// ```
package enum PathJSON {
    /// `path`'s object, with `timestamp` when `date` is given.
    package static func line(_ path: NetworkPath, at date: Date? = nil) -> String {
        var text = JSONBuffer(capacity: 384)
        write(path, at: date, into: &text)
        return text.text
    }

    /// Appends `path`'s object to `text`. `connectivity`, when given, writes the value of a
    /// `connectivity` key (a verdict's object), placed where the sorted keys put it.
    package static func write(
        _ path: NetworkPath, at date: Date?, into text: inout JSONBuffer,
        connectivity: ((inout JSONBuffer) -> Void)? = nil
    ) {
        text.append("{\"availableInterfaces\":[")
        for (position, interface) in path.availableInterfaces.enumerated() {
            if position > 0 { text.append(",") }
            text.append("{\"index\":")
            text.append(interface.index)
            text.append(",\"name\":")
            text.appendString(interface.name)
            text.append(",\"type\":")
            text.appendQuoted(verbatim: interface.type.rawValue)
            text.append("}")
        }
        text.append("]")
        if let connectivity {
            text.append(",\"connectivity\":")
            connectivity(&text)
        }
        text.append(",\"gateways\":[")
        for (position, gateway) in path.gateways.enumerated() {
            if position > 0 { text.append(",") }
            text.appendQuoted(gateway)
        }
        text.append("],\"isConstrained\":")
        text.append(path.isConstrained)
        text.append(",\"isExpensive\":")
        text.append(path.isExpensive)
        text.append(",\"isMultipath\":")
        text.append(path.isMultipath)
        text.append(",\"status\":")
        text.appendQuoted(verbatim: path.status.rawValue)
        text.append(",\"supportsDNS\":")
        text.append(path.supportsDNS)
        text.append(",\"supportsIPv4\":")
        text.append(path.supportsIPv4)
        text.append(",\"supportsIPv6\":")
        text.append(path.supportsIPv6)
        if let date {
            text.append(",\"timestamp\":\"")
            text.appendTimestamp(date)
            text.append("\"")
        }
        text.append(",\"unsatisfiedReason\":")
        if let reason = path.unsatisfiedReason {
            text.appendQuoted(verbatim: reason.rawValue)
        } else {
            text.append("null")
        }
        text.append(",\"version\":")
        text.appendString(PackageVersion.current)
        text.append("}")
    }

    /// `date` as the `timestamp` key writes it: `2026-11-22T19:40:01.123Z`.
    package static func timestamp(_ date: Date) -> String {
        var text = JSONBuffer(capacity: 24)
        text.appendTimestamp(date)
        return text.text
    }

    /// `value` as a JSON string literal, quotes included, escaped as `JSONEncoder` escapes it.
    package static func string(_ value: String) -> String {
        var text = JSONBuffer(capacity: value.utf8.count + 2)
        text.appendString(value)
        return text.text
    }
}
