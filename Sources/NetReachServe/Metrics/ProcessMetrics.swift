import NetReachSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `process_*` series Prometheus's client libraries export, read from `/proc/self` at each
/// scrape: CPU time, memory, descriptors and start time, under the same names and units.
///
/// A value that cannot be read (no procfs) is left out, never exported as 0.
///
/// ```swift
/// print(ProcessMetrics.read())   // # TYPE process_cpu_seconds_total counter ...
/// ```
package enum ProcessMetrics {
    /// The series in Prometheus's text format.
    package static func read(procfs: String = "/proc") -> String {
        var text = ""
        func add(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value else { return }
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(format(value))\n"
        }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        let stat = readFile("\(procfs)/self/stat").flatMap(StatFields.init)
        let bootTime = readFile("\(procfs)/stat").flatMap(Self.bootTime)
        add(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            stat.map { ticks > 0 ? Double($0.userTicks + $0.systemTicks) / ticks : nil } ?? nil)
        add(
            "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
            stat.map { Double($0.residentPages) * pageSize })
        add(
            "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
            stat.map { Double($0.virtualBytes) })
        add(
            "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
            stat.flatMap { stat in bootTime.map { Double($0) + Double(stat.startTicks) / max(ticks, 1) } })
        add("process_open_fds", "gauge", "Number of open file descriptors.", openDescriptors(procfs).map(Double.init))
        var limit = rlimit()
        add(
            "process_max_fds", "gauge", "Maximum number of open file descriptors.",
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Double(limit.rlim_cur) : nil)
        return text
    }

    /// The fields of `/proc/self/stat` we use. The command name (field 2) is in parentheses and
    /// may hold spaces and parentheses itself, so fields are counted from its last `)`.
    package struct StatFields: Sendable, Hashable {
        package var userTicks: UInt64
        package var systemTicks: UInt64
        package var startTicks: UInt64
        package var virtualBytes: UInt64
        package var residentPages: UInt64

        package init?(_ text: String) {
            guard let close = text.lastIndex(of: ")") else { return nil }
            // After ")": field 3 (state) is index 0.
            let fields = text[text.index(after: close)...].split(separator: " ")
            func field(_ number: Int) -> UInt64? {
                let index = number - 3
                return fields.indices.contains(index) ? UInt64(fields[index]) : nil
            }
            guard let user = field(14), let system = field(15), let start = field(22), let virtual = field(23),
                let resident = field(24)
            else { return nil }
            (userTicks, systemTicks, startTicks, virtualBytes, residentPages) = (user, system, start, virtual, resident)
        }
    }

    static func bootTime(_ text: String) -> UInt64? {
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return UInt64(line.dropFirst(6).trimmingPrefix(" "))
        }
        return nil
    }

    private static func openDescriptors(_ procfs: String) -> Int? {
        guard let directory = opendir("\(procfs)/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { name in
                name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            }
            if !isDot { count += 1 }
        }
        return count - 1 // the directory's own descriptor, open while it is read
    }

    /// procfs files are small; the bound only guards against a file that never ends.
    private static func readFile(_ path: String) -> String? {
        SystemCall.readFile(path, limit: 1 << 20).map { String(decoding: $0, as: UTF8.self) }
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}
