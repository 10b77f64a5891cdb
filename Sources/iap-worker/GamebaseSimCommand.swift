import ArgumentParser
struct GamebaseSimCommand: AsyncParsableCommand { static let configuration = CommandConfiguration(commandName: "gamebase-sim"); func run() async throws {} }
