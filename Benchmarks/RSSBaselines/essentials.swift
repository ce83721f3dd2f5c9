// RSS baseline: FoundationEssentials (no libFoundation, no ICU) plus Dispatch.
import Dispatch
import FoundationEssentials
import Glibc
DispatchQueue(label: "baseline").async { print("ready \(Date().timeIntervalSince1970 > 0)") }
sleep(3)
