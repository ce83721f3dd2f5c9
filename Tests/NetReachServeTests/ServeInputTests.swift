import NetReach
import NetReachConnectivity
import NetReachServe
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Requests and readings `serve` must refuse or survive with a clear answer.
@Suite("serve input")
struct ServeInputTests {
    @Test func aQueryWithAnUnknownParameterIsRefusedNamingWhatIsTaken() {
        #expect(throws: QueryParameters.Failure.unknown("too", allowed: ["namespace", "to"])) {
            try QueryParameters(parsing: "too=db", allowed: ["to", "namespace"])
        }
    }

    @Test func aRepeatedParameterOrBadPercentEncodingIsRefused() {
        #expect(throws: QueryParameters.Failure.repeated("to")) {
            try QueryParameters(parsing: "to=a&to=b", allowed: ["to"])
        }
        #expect(throws: QueryParameters.Failure.badEncoding("to=%zz")) {
            try QueryParameters(parsing: "to=%zz", allowed: ["to"])
        }
    }

    @Test func aQueryIsDecodedAndAFlagHasTheEmptyValue() throws {
        let query = try QueryParameters(parsing: "to=my+db%2F1&verbose", allowed: ["to", "verbose"])
        #expect(query["to"] == "my db/1")
        #expect(query["verbose"] == "")
        #expect(query["namespace"] == nil)
    }

    @Test func readinessWaitsForEveryPathThenForTheCondition() {
        let internet = PathKey(namespace: "", destination: "")
        let db = PathKey(namespace: "", destination: "db")
        let satisfied = NetworkPath(status: .satisfied, availableInterfaces: [], supportsIPv4: true)
        let down = NetworkPath.unsatisfied(.noDefaultRoute)
        var paths: [PathKey: ServeState.Watched] = [internet: .init(path: down, changes: 0, lastChange: 0)]
        var checks = Health.readiness(paths: paths, keys: [internet, db], condition: .started)
        #expect(checks.map(\.passed) == [false])
        paths[db] = .init(path: satisfied, changes: 0, lastChange: 0)
        checks = Health.readiness(paths: paths, keys: [internet, db], condition: .started)
        #expect(checks.map(\.passed) == [true])
        checks = Health.readiness(paths: paths, keys: [internet, db], condition: .satisfied)
        #expect(checks.map(\.passed) == [true, false])
        #expect(
            Health.readinessText(checks, verbose: false).contains(
                "[-]path internet in this namespace failed: no default route"))
        checks = Health.readiness(paths: paths, keys: [internet, db], condition: .destination("db"))
        #expect(checks.allSatisfy { $0.passed })
        #expect(Health.readinessText(checks, verbose: false) == "ok\n")
        #expect(Health.health(paths: paths, keys: [internet, db]).statusCode == 503)
    }

    @Test func aNamespaceServeMayNotEnterFailsReadinessSayingWhatItNeeds() throws {
        let key = PathKey(namespace: "4242", destination: "")
        let unavailable = NetworkPath.unsatisfied(.monitorUnavailable)
        let paths: [PathKey: ServeState.Watched] = [key: .init(path: unavailable, changes: 0, lastChange: 0)]
        let byProcess = try #require(
            NetworkWatch.permissionProblem(.namespaceUnavailable(path: "/proc/4242/ns/net", errno: EACCES)))
        #expect(
            byProcess
                == "cannot enter /proc/4242/ns/net: Permission denied (EACCES): it needs CAP_SYS_ADMIN and CAP_SYS_PTRACE (entering by process id); nothing is read from it"
        )
        let byName = NetworkWatch.permissionProblem(.namespaceUnavailable(path: "/run/netns/blue", errno: EPERM))
        #expect(byName?.contains("(EPERM): it needs CAP_SYS_ADMIN; ") == true, "\(byName ?? "nil")")
        // Other failures are not a permission: the path's reason and the metric tell them.
        #expect(NetworkWatch.permissionProblem(.namespaceUnavailable(path: "/run/netns/gone", errno: ENOENT)) == nil)
        #expect(NetworkWatch.permissionProblem(.namespaceGone(path: "/proc/4242/ns/net")) == nil)

        let checks = Health.readiness(
            paths: paths, keys: [key], condition: .started, namespaceProblems: ["4242": byProcess])
        #expect(checks.map(\.passed) == [true, false])
        #expect(
            Health.readinessText(checks, verbose: true)
                == "[+]started ok\n[-]namespace 4242 failed: \(byProcess)\nreadyz check failed\n")
    }

    @Test func readyWhenParsesItsFourForms() {
        #expect(Health.ReadyCondition(argument: "started") == .started)
        #expect(Health.ReadyCondition(argument: "satisfied") == .satisfied)
        #expect(Health.ReadyCondition(argument: "to=db") == .destination("db"))
        #expect(Health.ReadyCondition(argument: "to=") == nil)
        #expect(Health.ReadyCondition(argument: "internet") == .internet)
        #expect(Health.ReadyCondition(argument: "full") == nil)
    }

    @Test func healthWithProbesIsTheConnectivityLevelInConsulsStatuses() {
        let internet = PathKey(namespace: "", destination: "")
        let path = NetworkPath(status: .satisfied, availableInterfaces: [], supportsIPv4: true)
        let paths: [PathKey: ServeState.Watched] = [internet: .init(path: path, changes: 0, lastChange: 0)]
        func verdict(_ level: ConnectivityLevel) -> Connectivity {
            Connectivity(ipv4: .init(level: level), ipv6: .init(level: level), path: path)
        }
        func status(_ level: ConnectivityLevel?) -> Int {
            Health.health(paths: paths, keys: [internet], verdict: level.map(verdict), judges: true).statusCode
        }
        #expect(status(.full) == 200)
        #expect(status(.portal(loginURL: nil)) == 429)
        #expect(status(.limited) == 429)
        #expect(status(.local) == 429)
        #expect(status(ConnectivityLevel.none) == 503)
        #expect(status(nil) == 503)
        // Without probes, a satisfied path passes.
        #expect(Health.health(paths: paths, keys: [internet]).statusCode == 200)
    }

    @Test func procStatIsReadFromAfterTheLastParenthesisOfTheCommandName() throws {
        // A command name may hold spaces and parentheses: "(a) (b)".
        let line =
            "42 (a) (b) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 2048 18446744073709551615"
        let fields = try #require(ProcessMetrics.StatFields(line))
        #expect(fields.userTicks == 250)
        #expect(fields.systemTicks == 50)
        #expect(fields.startTicks == 1000)
        #expect(fields.virtualBytes == 123_456_789)
        #expect(fields.residentPages == 2048)
        #expect(ProcessMetrics.StatFields("garbage") == nil)
        #expect(ProcessMetrics.StatFields("1 (x) S 1 2") == nil)
    }
}
