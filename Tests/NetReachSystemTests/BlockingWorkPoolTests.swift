import Dispatch
import NetReachSystem
import Testing

/// `BlockingWork.Pool`: no more threads than its width however many jobs hang, and a job that
/// waits past its deadline is given up without ever running.
@Suite("BlockingWork.Pool")
struct BlockingWorkPoolTests {
    @Test func hangingJobsHoldTheWidthAndALateJobIsNeverRun() async {
        let pool = BlockingWork.Pool(named: "netreach-test", width: 2)
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let hanging = (0..<2).map { index in
            Task {
                await pool.run(until: .now + .seconds(600)) {
                    started.signal()
                    release.wait()
                    return index
                }
            }
        }
        for _ in 0..<2 { await BlockingWork.run(named: "netreach-wait") { started.wait() } }
        let ran = Locked(false)
        // Both threads hang: this one waits in line until its deadline, then is dropped.
        let late: Void? = await pool.run(until: .now + .milliseconds(200)) { ran.withLock { $0 = true } }
        #expect(late == nil)
        #expect(pool.threadCount == 2)
        release.signal()
        release.signal()
        var results: [Int] = []
        for task in hanging { if let value = await task.value { results.append(value) } }
        #expect(results.sorted() == [0, 1])
        #expect(await pool.run(until: .now + .seconds(60)) { 7 } == 7)
        #expect(!ran.withLock { $0 }, "a job given up ran later")
        #expect(pool.threadCount == 2)
    }
}
