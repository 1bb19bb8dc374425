// What every nnpipe command-line tool shares: the exit codes (docs/TOOLS.md has the table),
// the command-line parse that maps CLI11's own codes (105 for a bad value, 106 for a
// missing argument, ...) onto them, and error lines that name a file once.
// Header-only: nngraph uses it without the engine.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace nn::tools {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,  // the command was understood but failed: a model, file, delegate or run error
  kExitUsage = 2,   // the command line is wrong: unknown option, missing or bad argument
};

// Parses argv; returns the code to exit with when main should stop here: kExitOk after
// --help, kExitUsage (with CLI11's message on stderr) for any parse error.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

// "path: message", unless the message already names the path (the readers name the file
// they fail on, the converters do not), so an error line names its file once.
inline std::string with_path(const std::string& path, const std::string& message) {
  if (message.find(path + ":") != std::string::npos) return message;
  return path + ": " + message;
}

}  // namespace nn::tools

// CLI11_PARSE with nnpipe's exit codes.
#define NN_PARSE_COMMAND_LINE(app, argc, argv)                                      \
  if (auto nn_parse_exit = nn::tools::parse_command_line(app, argc, argv)) return *nn_parse_exit
