// Placeholder until the CLI lands.
@main struct NetreachPlaceholder { static func main() {} }
