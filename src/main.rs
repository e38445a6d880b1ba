//! The `agentd` binary: everything lives in the library; see `agentd::cli`.

fn main() -> std::process::ExitCode {
    agentd::cli::main()
}
