// One GET of the URL given, its body read and dropped, with AsyncHTTPClient's shared client and
// nothing else: no argument parser, no path monitor. Exit status 0 for a 2xx answer, 1 otherwise.
//
//   BareGet http://127.0.0.1:8080/small.txt
import AsyncHTTPClient
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

@main
struct BareGet {
    static func main() async {
        guard CommandLine.arguments.count == 2 else {
            print("usage: BareGet URL")
            exit(64)
        }
        do {
            let response = try await HTTPClient.shared.execute(
                HTTPClientRequest(url: CommandLine.arguments[1]), timeout: .seconds(30))
            for try await _ in response.body {}  // read to the end, as a client writing to /dev/null does
            exit((200..<300).contains(response.status.code) ? 0 : 1)
        } catch {
            print("BareGet: \(error)")
            exit(1)
        }
    }
}
