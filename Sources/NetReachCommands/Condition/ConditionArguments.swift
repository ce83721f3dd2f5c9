import ArgumentParser
import NetReachConditioner
import NetReachSystem

/// The values `netreach condition` parses by hand: addresses, rates, loss shares and faults.
/// Each parser throws a `ValidationError` that says what was wrong and what is accepted.
package enum ConditionArguments {
    /// A `HOST:PORT` (`[IPV6]:PORT` for IPv6; brackets may enclose an IPv4 address too), with an
    /// optional `NAME=` in front for a listener.
    package struct Address: Sendable, Hashable {
        package var name: String?
        package var host: String
        package var port: Int
    }

    /// Parses `127.0.0.1:8080`, `[::1]:8080`, `[127.0.0.1]:8080`, `localhost:80`; with `allowsName`,
    /// also `api=127.0.0.1:8080`.
    /// `allowsZeroPort` accepts port 0 (a free port, for listening).
    package static func address(
        _ text: String, option: String, allowsName: Bool, allowsZeroPort: Bool
    ) throws(ValidationError) -> Address {
        var rest = Substring(text)
        var name: String?
        if allowsName, let equals = rest.firstIndex(of: "=") {
            name = String(rest[..<equals])
            rest = rest[rest.index(after: equals)...]
            guard let name, ControlRoutes.isName(name) else {
                throw ValidationError("\(option) \(text): a listener's name is letters, digits, '.', '_' and '-'.")
            }
        }
        // The grammar serve's --listen and its file's listen share (NetReachSystem).
        do {
            let address = try HostPort(parsing: rest, allowsZeroPort: allowsZeroPort)
            return Address(name: name, host: address.host, port: address.port)
        } catch {
            throw ValidationError("\(option) \(text): \(error.message)")
        }
    }

    /// Parses a bandwidth: a number and a unit of bits (`bit`, `kbit`, `mbit`, `gbit`, decimal, as
    /// link speeds are given) or bytes (`B`, `kB`, `MB`, `GB`, decimal), per second; `/s` may follow,
    /// and `mbps` is megabits, `MBps` megabytes.
    /// Returns bytes per second.
    package static func bandwidth(_ text: String, option: String) throws(ValidationError) -> Int {
        let expected =
            "\(option) \(text): expected a bandwidth such as 780kbit, 40mbit, 1gbit, 500kB or 2MB (per second)"
        var body = Substring(text)
        if body.hasSuffix("/s") { body = body.dropLast(2) }
        if body.hasSuffix("bps") { body = body.dropLast(3) + "bit" } // 10mbps: bits
        if body.hasSuffix("Bps") { body = body.dropLast(2) } // 10MBps: bytes
        let number = body.prefix { $0.isDigitASCII || $0 == "." }
        let unit = body.dropFirst(number.count)
        let units: [String: Double] = [
            "bit": 1.0 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
            "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9,
        ]
        // B is bytes, b is bits: "500kb" is ambiguous, so only the spelt-out forms take a b.
        let key = unit.hasSuffix("B") ? unit.lowercased() : (unit.hasSuffix("bit") ? unit.lowercased() : "")
        guard !number.isEmpty, number.filter({ $0 == "." }).count <= 1, let value = Double(number),
            let scale = units[key]
        else {
            throw ValidationError(expected + ".")
        }
        let bytes: Double = (value * scale).rounded(.toNearestOrAwayFromZero)
        guard bytes >= 1, bytes < 1e15 else {
            throw ValidationError(
                "\(option) \(text): a bandwidth is at least 8 bit/s (use --loss 100% or --profile 100-loss for a link that carries nothing)."
            )
        }
        return Int(bytes)
    }

    /// Parses a loss: `10%` or a share `0.1`; from 0 to 100%.
    package static func loss(_ text: String, option: String) throws(ValidationError) -> Double {
        let percent = text.hasSuffix("%")
        let number = percent ? String(text.dropLast()) : text
        guard !number.isEmpty, number.allSatisfy({ $0.isDigitASCII || $0 == "." }), let value = Double(number) else {
            throw ValidationError("\(option) \(text): expected a loss such as 10% or 0.1.")
        }
        let share = percent ? value / 100 : value
        guard (0...1).contains(share) else { throw ValidationError("\(option) \(text): a loss is from 0 to 100%.") }
        return share
    }

    /// Parses a duration (`100ms`, `1.5s`) for `option`.
    package static func duration(_ text: String, option: String) throws(ValidationError) -> Duration {
        do {
            return try WaitDuration(parsing: text).duration
        } catch {
            throw ValidationError("\(option) \(text): \(error.message)")
        }
    }

    /// Parses a fault: `TYPE` or `TYPE:KEY=VALUE,...`, with toxiproxy's type names:
    ///
    /// ```
    /// reset_peer:after=500ms        timeout:after=2s (without after: hold for ever)
    /// slow_close:delay=1s           limit_data:bytes=1000
    /// slicer:size=64,variation=16,delay=10ms
    /// ```
    ///
    /// Every fault also takes `direction=upstream|downstream|both` (default both) and `name=NAME`
    /// (default its type).
    package static func fault(_ text: String) throws(ValidationError) -> NamedFault {
        let option = "--fault"
        let (type, rest) =
            text.firstIndex(of: ":").map { (String(text[..<$0]), String(text[text.index(after: $0)...])) } ?? (text, "")
        var values: [String: String] = [:]
        for pair in rest.split(separator: ",", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError(
                    "\(option) \(text): expected KEY=VALUE after the type, such as limit_data:bytes=1000.")
            }
            guard values.updateValue(parts[1], forKey: parts[0]) == nil else {
                throw ValidationError("\(option) \(text): \(parts[0]) is given twice.")
            }
        }
        let allowed: [String: Set<String>] = [
            "reset_peer": ["after"], "timeout": ["after"], "slow_close": ["delay"], "limit_data": ["bytes"],
            "slicer": ["size", "variation", "delay"],
        ]
        guard let keys = allowed[type] else {
            throw ValidationError(
                "\(option) \(text): unknown fault \(type) (reset_peer, timeout, slow_close, limit_data, slicer).")
        }
        if let unknown = values.keys.sorted().first(where: { !keys.contains($0) && $0 != "direction" && $0 != "name" })
        {
            throw ValidationError(
                "\(option) \(text): \(type) takes \(keys.sorted().joined(separator: ", ")), direction and name, not \(unknown)."
            )
        }
        func time(_ key: String) throws(ValidationError) -> Duration? {
            try values[key].map { text throws(ValidationError) in try duration(text, option: "\(option) \(type) \(key)")
            }
        }
        func count(_ key: String) throws(ValidationError) -> Int? {
            guard let value = values[key] else { return nil }
            guard value.allSatisfy(\.isDigitASCII), let number = Int(value) else {
                throw ValidationError("\(option) \(text): \(key) is a whole number of bytes.")
            }
            return number
        }
        let fault: LinkFault
        switch type {
        case "reset_peer": fault = .resetPeer(after: try time("after") ?? .zero)
        case "timeout": fault = .timeout(after: try time("after"))
        case "slow_close": fault = .slowClose(delay: try time("delay") ?? .zero)
        case "limit_data":
            guard let bytes = try count("bytes") else {
                throw ValidationError("\(option) \(text): limit_data needs bytes=N.")
            }
            fault = .limitData(bytes: bytes)
        default:
            guard let size = try count("size") else {
                throw ValidationError("\(option) \(text): slicer needs size=N (and may take variation=N, delay=D).")
            }
            fault = .slicer(
                averageSize: size, sizeVariation: try count("variation") ?? 0, delay: try time("delay") ?? .zero)
        }
        let directions: Set<LinkDirection>
        switch values["direction"] ?? "both" {
        case "both": directions = Set(LinkDirection.allCases)
        case "upstream": directions = [.upstream]
        case "downstream": directions = [.downstream]
        case let other:
            throw ValidationError("\(option) \(text): direction is upstream, downstream or both, not \(other).")
        }
        let name = values["name"] ?? type
        guard ControlRoutes.isName(name) else {
            throw ValidationError("\(option) \(text): a fault's name is letters, digits, '.', '_' and '-'.")
        }
        let named = NamedFault(name: name, fault: fault, directions: directions)
        do {
            try named.validate()
        } catch {
            throw ValidationError("\(option) \(text): \(error.description).")
        }
        return named
    }
}

extension Character {
    /// 0 to 9 only (`isNumber` takes other scripts' digits and fractions too).
    var isDigitASCII: Bool { ("0"..."9").contains(self) }
}
