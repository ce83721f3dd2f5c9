// The placeholders that README and DocC snippets use without declaring: the app's own functions,
// types and values, and the `monitor`, `service` and `policy` a snippet continues from. Only these
// are stubbed; NetReach's API is the real one. The Generated_*.swift files beside this one come
// from scripts/extract-snippets.py and are never called: the test build compiling them is the check.
import Foundation
import NetReach
import NetReachHTTP
import NetReachURLSession

// Values a snippet continues from, as an earlier snippet of its document made them.
let monitor = PathMonitor()
let service = NetworkService(baseURL: URL(string: "https://api.example.com"), transport: URLSessionTransport())
let policy = RequestPolicy()

// The app's data.
struct Item: Codable, Sendable {
    var name: String
}

struct Order: Codable, Sendable {
    var id = UUID()
    var items: [Item] = []
}

let newOrder = Order()
let archive = Data()
let containerPID: Int32 = 4242

// The app's own functions.
func currentToken() -> String { "token" }
func sendFirstRequest() {}
func uploadBacklog() async {}
func sync() {}
func render(_ body: Data) {}
func show(_ message: String) {}
func log(_ message: String) {}
