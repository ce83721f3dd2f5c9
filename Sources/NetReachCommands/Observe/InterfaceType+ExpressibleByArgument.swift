import ArgumentParser
import NetReach

// `--interface-type wiredEthernet`: the raw values are Network.framework's case names, and being
// `CaseIterable` makes argument-parser list them in `--help` and in the error for a bad value.
// The conformance lives in the CLI because NetReach does not depend on argument-parser, and
// must not. (No `@retroactive`: the compiler counts NetReach as the same package.)
extension InterfaceType: ExpressibleByArgument {}

// `--protocol tcp|udp`, listed the same way.
extension TransportProtocol: ExpressibleByArgument {}
