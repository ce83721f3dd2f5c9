// RSS baseline: the smallest program that imports Foundation and runs one Dispatch block.
import Foundation
DispatchQueue(label: "baseline").async { print("ready") }
sleep(3)
